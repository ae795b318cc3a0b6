"""Study 02's arms, each declared once: what it is, how it is built from the architecture (``Config``), and what the
analysis asks of it — whether its weights are shared across depth, gated by depth, integrated as an ODE (x + dt·f,
re-discretisable), or a twin (another initial draw of an arm, the null arm). The parameters' ``models`` choose among
``ARMS``; the notebook's tables and figures read the properties. A new arm is a line here, over the blocks of
odebook.nn (a new block belongs there).

Depth-shared arms apply one depth-dependent ``block(x, t, h)`` ``n_layer`` times (odebook.nn.depth.DepthStack); the
standard arm stacks ``n_layer`` independent pre-LN blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from odebook.models.lm import LM, depth_shared, gpt
from odebook.nn import GatedBlock, HyperBlock, OutputGatedBlock, SSMGatedBlock

__all__ = ["Config", "Arm", "ARMS", "TWIN_SEED", "build", "having", "table"]

TWIN_SEED = 1_000_003  # a twin draws its initial weights from seed + this (no run seed comes near it)


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that builds the study's arms: made by the parameters (``model_config``), which hold every default."""

    vocab_size: int
    d_model: int
    n_head: int
    n_layer: int
    max_seq_len: int
    n_freq: int
    d_emb: int
    gate_width: int
    d_state: int
    norm: str  # LayerNorms of the GatedBlock arms: "static" | "temporal" (odebook.nn.modulated)
    tong_time_mlp: str  # Tong's time MLPs: "shared" | "per_linear" (odebook.nn.hypernet)

    def build(self, name: str) -> LM:
        """The arm ``name`` of ``ARMS`` at this configuration."""
        return build(name, self)


def _gated(granularity: str) -> Callable[[Config], nn.Module]:
    return lambda c: GatedBlock(d_model=c.d_model, n_head=c.n_head, granularity=granularity, n_freq=c.n_freq,
                                gate_width=c.gate_width, norm=c.norm)


def _ssm(*, state: bool) -> Callable[[Config], nn.Module]:
    return lambda c: SSMGatedBlock(d_model=c.d_model, n_head=c.n_head, d_state=c.d_state, n_freq=c.n_freq,
                                   gate_width=c.gate_width, norm=c.norm, state=state)


@dataclasses.dataclass(frozen=True)
class Arm:
    """An arm: ``what`` it is (one line of the models table); ``block``, the depth-shared block it applies (None: the
    standard transformer's independent blocks); its ``residual`` ("direct": x + f; "dt": x + dt·f, an ODE's Euler
    step) and depth input (``time``: "depth", or "constant": t held fixed); ``gated``: its weights are modulated by
    gates of t; ``twin_of``: it is that arm from another initial draw."""

    what: str
    block: Callable[[Config], nn.Module] | None = None
    residual: str = "direct"
    time: str = "depth"
    gated: bool = False
    twin_of: str | None = None

    @property
    def shared(self) -> bool:
        """One set of weights across depth (every arm but the standard transformer and a twin, which is its arm)."""
        return self.block is not None

    @property
    def ode_style(self) -> bool:
        """Integrated as an ODE (x + dt·f): it can be evaluated at other step counts (re-discretised)."""
        return self.residual == "dt"


ARMS: dict[str, Arm] = {
    "standard": Arm("L independent pre-LN transformer blocks"),
    "tong": Arm("one block, every weight and LayerNorm made from sinusoidal features of t; Euler, dt = 1/L, "
                "t_k = (k+1)·dt",
                lambda c: HyperBlock(d_model=c.d_model, n_head=c.n_head, n_freq=c.n_freq, d_emb=c.d_emb,
                                     time_mlp=c.tong_time_mlp), residual="dt"),
    "ti_mlp": Arm("shared weights, per-channel gates σ(a_out(t)) σ(a_in(t))ᵀ (what the published code did); x + f",
                  _gated("channel"), gated=True),
    "ti_mlp_full": Arm("shared weights, one gate per weight (the published formula); x + f", _gated("full"),
                       gated=True),
    "ti_ssm": Arm("`ti_mlp` with a selective diagonal SSM beside attention, its A, B, C, Δ, D gated by depth",
                  _ssm(state=True), gated=True),
    "ti_ssm_memoryless": Arm("`ti_ssm` without the SSM's state (its decay 0: each token reads only itself), trained "
                             "— the SSM claim's negative control", _ssm(state=False), gated=True),
    "ti_mlp_constant": Arm("`ti_mlp` with t held fixed — the adapter structure without time dependence (the control)",
                           _gated("channel"), time="constant", gated=True),
    "ti_mlp_dt": Arm("`ti_mlp` with ODE scaling x + dt·f", _gated("channel"), residual="dt", gated=True),
    "ode_shared": Arm("ODE integration with weight sharing: x + dt·(f_base(x) ⊙ m(t))",
                      lambda c: OutputGatedBlock(d_model=c.d_model, n_head=c.n_head, n_freq=c.n_freq,
                                                 gate_width=c.gate_width), residual="dt", gated=True),
    "ti_mlp_twin": Arm("`ti_mlp` again from another initial draw, tuned and trained the same way — the null arm",
                       twin_of="ti_mlp"),
}


def build(name: str, c: Config) -> LM:
    """Arm ``name`` at configuration ``c``. A twin is its arm built from a generator of its own, seeded ``TWIN_SEED``
    past the run's seed (not a shift of its arm's draws)."""
    if name not in ARMS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(ARMS)}")
    arm = ARMS[name]
    if arm.twin_of:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed((TWIN_SEED + torch.initial_seed()) % 2**63)
            return build(arm.twin_of, c)
    if arm.block is None:
        return gpt(vocab_size=c.vocab_size, d_model=c.d_model, n_head=c.n_head, n_layer=c.n_layer,
                   max_seq_len=c.max_seq_len)
    return depth_shared(vocab_size=c.vocab_size, d_model=c.d_model, max_seq_len=c.max_seq_len, block=arm.block(c),
                        steps=c.n_layer, residual=arm.residual, time=arm.time)


def having(names: list[str], prop: str) -> list[str]:
    """The arms among ``names`` (in their order) with the property ``prop`` ("shared", "gated", "ode_style"): those a
    per-model table or figure shows. A twin repeats its arm, so it is never among them."""
    return [n for n in names if getattr(ARMS[n], prop)]


def table(names: list[str]) -> str:
    """The models table (Markdown) of the arms ``names``."""
    return "| model | what it is |\n|---|---|\n" + "\n".join(f"| `{n}` | {ARMS[n].what} |" for n in names)
