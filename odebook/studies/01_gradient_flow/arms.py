"""Study 01's arms from one hybrid configuration (odebook.models.arms.HybridConfig): the baseline GPT, the ODE hybrid,
the controls that make "as good as the baseline" mean something — the baseline with the replaced layers removed
(``null``) and the hybrid whose flow has no attention (``tokenwise``: it cannot move information between tokens) —
the hybrid at the source's initial α (``hybrid_source``, where the profile starts the flow elsewhere) and, on
WikiText only, one weight-shared discrete block applied as many times as the ODE evaluates its field
(``shared``). ``layer_groups`` splits any arm's parameters by position, so gradient norms compare across arms."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import nn

from odebook.models.arms import HybridConfig
from odebook.models.lm import LM

__all__ = ["ARMS", "SOURCE_ALPHA", "gradient_flow_arms", "mqar_arms", "layer_groups"]


ARMS = ("baseline", "hybrid", "null", "shared")  # the WikiText section's
SOURCE_ALPHA = 0.1  # the source's initial output scale of the flow


def gradient_flow_arms(config: HybridConfig, arms: Sequence[str] = ARMS) -> dict[str, Callable[[], LM]]:
    """Study 01's models by name (the module docstring; HybridConfig builds each)."""
    return {arm: config.replace(alpha_init=SOURCE_ALPHA).hybrid if arm == "hybrid_source" else getattr(config, arm)
            for arm in arms}


def mqar_arms(config: HybridConfig) -> dict[str, Callable[[], LM]]:
    """The arms of the claims: baseline, hybrid, null, tokenwise, and hybrid_source where ``config`` starts the flow
    at another α than the source's."""
    source = ("hybrid_source",) if config.alpha_init != SOURCE_ALPHA else ()
    return gradient_flow_arms(config, ("baseline", "hybrid", "null", "tokenwise", *source))


def layer_groups(model: LM, replaced: range) -> dict[str, list[nn.Parameter]]:
    """Parameters by position, for gradient norms that compare across arms: embedding, the blocks before the
    replaced span, the span itself, the blocks after it, and the head (final LayerNorm + projection)."""
    blocks = list(model.blocks)
    params = lambda bs: [p for b in bs for p in b.parameters()]  # noqa: E731
    groups = {"embedding": [*model.tok_emb.parameters(), *model.pos_emb.parameters()],
              "before": params(blocks[: replaced.start]), "replaced": params(blocks[replaced.start: replaced.stop]),
              "after": params(blocks[replaced.stop:]), "head": [*model.ln_f.parameters(), *model.head.parameters()]}
    return {name: ps for name, ps in groups.items() if ps}
