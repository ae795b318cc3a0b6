"""One language-model assembly for every study: embeddings → a stack of blocks → LayerNorm → head.

Blocks share one signature, ``block(x, control=None) -> x``, so discrete layers, ODE flows, depth-shared blocks and
recurrent mixers stack freely; the embedding, head, loss and initialisation are the same for all of them. The
architectures studies build their arms from live here too (a GPT, the ODE hybrid, a depth-shared stack, a layer
pattern), so notebooks, tests and benchmarks build the same models.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from odebook.nn import Block, DepthStack, KVCache, ODEFlowBlock
from odebook.nn.attention import CausalSelfAttention, SlidingWindowAttention
from odebook.nn.gdn import NO_ABLATION, Ablation, GatedDeltaNet
from odebook.nn.state_read import StateReadAttention
from odebook.models.local_paths import LOCAL_PATHS, LocalPath
from odebook.nn import gemm
from odebook.nn.linear_ce import linear_cross_entropy
from odebook.nn.ode import FIXED_GRID, ode_layers_problem

__all__ = ["LM", "gpt", "ode_hybrid", "depth_shared", "pattern_lm", "reach", "Ablation",
           "gdn_diagnostics", "generate", "cache_problem", "ode_blocks", "lm_loss", "mixed_loss", "param_groups",
           "count_params", "block_params"]

HEAD_MULTIPLE = 64  # the head's outputs are padded to a multiple of this: 50,304 columns run faster than 50,257


class Head(nn.Module):
    """The output projection d → vocab without bias, its weight stored as [d, padded vocab] and applied as h @ W.

    ``vocab_size`` is rounded up to HEAD_MULTIPLE columns for matmul speed and the logits are cut back, so the spare
    columns never affect the output (nor receive a gradient). The [d, vocab] layout (rather than nn.Linear's
    [vocab, d]) made the one-row product of a decoding step faster on the CPU and left training as fast (study
    01's t4 step in an interleaved A/B: within noise)."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.weight = nn.Parameter(torch.empty(d_model, -(-vocab_size // HEAD_MULTIPLE) * HEAD_MULTIPLE))

    @property
    def n_spare_params(self) -> int:
        return (self.weight.shape[1] - self.vocab_size) * self.weight.shape[0]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return gemm.linear(h, self.weight.t())[..., : self.vocab_size]  # h @ W (oneDNN on the CPU: odebook.nn.gemm)


class LM(nn.Module):
    """Token + learned positional embeddings → blocks → final LayerNorm → untied linear head (``Head``; its spare
    padding columns are not counted as parameters)."""

    def __init__(self, *, vocab_size: int, d_model: int, max_seq_len: int, blocks: Iterable[nn.Module],
                 dropout: float = 0.0):
        super().__init__()
        self.max_seq_len, self.vocab_size = max_seq_len, vocab_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_seq_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = Head(d_model, vocab_size)
        self.n_spare_params = self.head.n_spare_params
        self.apply(_init_weights)

    def forward(self, idx: torch.Tensor, control: torch.Tensor | None = None, *, targets: torch.Tensor | None = None,
                ablation: Ablation = NO_ABLATION) -> torch.Tensor:
        """idx: [B, T] token ids → logits [B, T, vocab]; ``ablation`` zeroes what it names (odebook.nn.gdn). With
        ``targets`` [B, T], the mean next-token cross-entropy instead (targets equal to IGNORE_INDEX are padding),
        computed over slices of the tokens so the full logits are never held (odebook.nn.linear_ce)."""
        h = self.run(idx, control, ablation=ablation)[0]
        if targets is None:
            return self.logits(h)
        return linear_cross_entropy(h.flatten(0, 1), self.head.weight, targets.flatten(), vocab_size=self.vocab_size)

    def hidden(self, idx: torch.Tensor, control: torch.Tensor | None = None,
               cache: KVCache | None = None) -> torch.Tensor:
        """The final-LayerNorm features [B, T, d] of ``idx`` [B, T]. With ``cache``, ``idx`` continues the cached
        sequence: positions start at ``cache.length`` and attention reads the cached keys and values."""
        return self.run(idx, control, cache)[0]

    def run(self, idx: torch.Tensor, control: torch.Tensor | None = None, cache: KVCache | None = None, *,
            ablation: Ablation = NO_ABLATION) -> tuple[torch.Tensor, list[dict[str, float]]]:
        """(final-LayerNorm features [B, T, d], per-block mixer diagnostics). Each GDN block's writes are passed on
        to the blocks after it (a state-reading layer reads the latest), explicitly and within this call only."""
        start, T = (cache.length if cache is not None else 0), idx.shape[1]
        if start + T > self.max_seq_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_seq_len = {self.max_seq_len}")
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(start, start + T, device=idx.device)))
        writes, diagnostics = None, []
        if cache is not None:
            cache.begin(T)
        for block in self.blocks:
            if isinstance(block, Block):
                x, writes, diag = block.step(x, cache=cache, writes=writes, ablation=ablation)
                diagnostics.append(diag)
            else:
                x = block(x, control=control) if cache is None else block(x, control=control, cache=cache)
        if cache is not None:
            cache.end()
        return self.ln_f(x), diagnostics

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Head of the features ``h`` [..., d] → logits [..., vocab]."""
        return self.head(h)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding, Head)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def gpt(*, vocab_size: int, d_model: int, n_layer: int, n_head: int, max_seq_len: int,
        dropout: float = 0.0) -> LM:
    """The baseline: ``n_layer`` pre-LN transformer blocks."""
    blocks = [Block(d_model=d_model, n_head=n_head, dropout=dropout) for _ in range(n_layer)]
    return LM(vocab_size=vocab_size, d_model=d_model, max_seq_len=max_seq_len, blocks=blocks, dropout=dropout)


def ode_hybrid(*, vocab_size: int, d_model: int, n_layer: int, n_head: int, max_seq_len: int,
               ode_layers: Sequence[int], dropout: float = 0.0, **ode_options) -> LM:
    """The baseline with the consecutive layers ``ode_layers`` replaced by one ODEFlowBlock(**ode_options)."""
    problem = ode_layers_problem(list(ode_layers), n_layer)
    if problem:
        raise ValueError(f"ode_layers = {list(ode_layers)}: {problem}")
    first, last = ode_layers[0], ode_layers[-1]
    blocks: list[nn.Module] = [Block(d_model=d_model, n_head=n_head, dropout=dropout) for _ in range(first)]
    blocks.append(ODEFlowBlock(d_model=d_model, n_head=n_head, **ode_options))
    blocks += [Block(d_model=d_model, n_head=n_head, dropout=dropout) for _ in range(last + 1, n_layer)]
    return LM(vocab_size=vocab_size, d_model=d_model, max_seq_len=max_seq_len, blocks=blocks, dropout=dropout)


def depth_shared(*, vocab_size: int, d_model: int, max_seq_len: int, block: nn.Module, steps: int,
                 residual: str = "dt", time: str = "depth") -> LM:
    """One depth-dependent ``block(x, t, h)`` applied ``steps`` times (see odebook.nn.depth.DepthStack)."""
    stack = DepthStack(block, steps=steps, residual=residual, time=time)
    return LM(vocab_size=vocab_size, d_model=d_model, max_seq_len=max_seq_len, blocks=[stack])


def pattern_lm(pattern: str, *, vocab_size: int, d_model: int, n_head: int, max_seq_len: int,
               head_dim: int | None = None, window: int = 64, conv_width: int = 4, beta_floor: float = 0.0,
               chunk_size: int = 64, dropout: float = 0.0, state_read: bool = False,
               local_path: str | LocalPath = "none") -> LM:
    """A stack written as a string, one letter a layer — G: Gated DeltaNet, S: sliding-window attention (window
    ``window``), W: sliding-window attention behind the GDN's short convolution (width ``conv_width``), A: full causal
    attention, C: full causal attention behind that convolution — each mixer in a pre-LN Block with an MLP. With
    ``state_read``, each S layer is the hybrid's StateReadAttention reading the nearest G layer before it, its local
    path a LocalPath (``local_path``: one, or its name in odebook.models.local_paths.LOCAL_PATHS)."""
    if not isinstance(local_path, LocalPath) and local_path not in LOCAL_PATHS:
        raise ValueError(f"unknown local_path {local_path!r}; allowed: {', '.join(LOCAL_PATHS)} or a LocalPath")
    path = local_path if isinstance(local_path, LocalPath) else LOCAL_PATHS[local_path]
    read_dim: int | None = None

    def mixer(letter: str) -> nn.Module:
        nonlocal read_dim
        if letter == "G":
            gdn = GatedDeltaNet(d_model=d_model, n_head=n_head, head_dim=head_dim, conv_width=conv_width,
                                beta_floor=beta_floor, chunk_size=chunk_size)
            read_dim = gdn.n_head * gdn.head_dim
            return gdn
        if letter == "S" and state_read:
            if read_dim is None:
                raise ValueError(f"pattern {pattern!r}: a state-reading S layer needs a G layer before it")
            return StateReadAttention(d_model=d_model, n_head=n_head, read_dim=read_dim, window=window,
                                      **path.layer_options())
        if letter in "SW":
            return SlidingWindowAttention(d_model=d_model, n_head=n_head, window=window, dropout=dropout,
                                          conv_width=conv_width if letter == "W" else 0)
        if letter in "AC":
            return CausalSelfAttention(d_model=d_model, n_head=n_head, dropout=dropout,
                                       conv_width=conv_width if letter == "C" else 0)
        raise ValueError(f"unknown layer {letter!r} in pattern {pattern!r}; allowed: G, S, W, A, C")

    blocks = [Block(d_model=d_model, dropout=dropout, mixer=mixer(c)) for c in pattern]
    return LM(vocab_size=vocab_size, d_model=d_model, max_seq_len=max_seq_len, blocks=blocks, dropout=dropout)


def reach(pattern: str, *, window: int, conv_width: int = 4) -> int | None:
    """How many tokens back the last position of a ``pattern_lm`` stack sees: each sliding-window layer adds
    ``window`` − 1, a W layer's short convolution ``conv_width`` − 1 more; None when a layer keeps a state or attends
    to every position (G, A, C)."""
    if set(pattern) - {"S", "W"}:
        return None
    return sum(window - 1 + (conv_width - 1) * (c == "W") for c in pattern)


@torch.no_grad()
def gdn_diagnostics(model: LM, idx: torch.Tensor) -> list[dict[str, float]]:
    """Per GDN or state-reading layer, on the input ``idx``: state norm, mean β and mean gate (GDN layers); gate
    mean, local and retrieval norms (state-reading attention)."""
    return [d for d in model.run(idx)[1] if d]


def ode_blocks(model: nn.Module) -> list[ODEFlowBlock]:
    """Every ODE flow block inside ``model``."""
    return [m for m in model.modules() if isinstance(m, ODEFlowBlock)]


def cache_problem(model: LM) -> str | None:
    """Why ``model`` cannot decode with a KV cache, or None when it can: every block must be a Block whose mixer is
    full causal attention, or an ODEFlowBlock with a fixed-grid solver."""
    for i, block in enumerate(model.blocks):
        if isinstance(block, ODEFlowBlock) and block.solver not in FIXED_GRID:
            return f"block {i} integrates with the adaptive {block.solver!r}: its evaluation times depend on the input"
        if isinstance(block, Block) and (problem := block.cache_problem()):
            return f"block {i}: {problem}"
        if not isinstance(block, (Block, ODEFlowBlock)):
            return f"block {i} is a {type(block).__name__}, which has no KV cache"
    return None


@torch.no_grad()
def generate(model: LM, idx: torch.Tensor, n_new: int, *, temperature: float = 1.0, top_k: int | None = None,
             generator: torch.Generator | None = None, cache: bool | None = None) -> torch.Tensor:
    """Append ``n_new`` tokens to ``idx`` [B, T]: greedy at temperature 0, else sampled (optionally from the top k).

    ``cache``: True decodes with a KV cache (each new token runs through the model once; the whole sequence must fit
    max_seq_len); False recomputes the window of the last max_seq_len tokens for every token; None (default) uses
    the cache when the model supports it and the sequence fits."""
    model.eval()
    problem = cache_problem(model) or (None if idx.shape[1] + n_new <= model.max_seq_len else
                                       f"{idx.shape[1]} + {n_new} tokens exceed max_seq_len = {model.max_seq_len}")
    if cache and problem:
        raise ValueError(f"cannot generate with a KV cache: {problem}")
    kv = None if cache is False or problem else KVCache(model.max_seq_len)
    h = model.hidden(idx[:, -model.max_seq_len:], cache=kv)[:, -1]
    for i in range(n_new):
        logits = model.logits(h).float()
        if temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.shape[-1])).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)
        idx = torch.cat([idx, nxt], 1)
        if i + 1 < n_new:
            h = model.hidden(nxt if kv is not None else idx[:, -model.max_seq_len:], cache=kv)[:, -1]
    return idx


def lm_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy of an LM (or its DistributedDataParallel wrapper) on (inputs, targets); targets
    equal to IGNORE_INDEX are padding. Goes through the model's forward, so DDP sees it."""
    x, y = batch
    return model(x, targets=y)


def mixed_loss(model: nn.Module, batch: tuple[tuple, tuple]) -> torch.Tensor:
    """The mixed regime: half ``lm_loss`` on a batch of text windows, half on a batch of retrieval prompts."""
    lm_batch, prompt_batch = batch
    return 0.5 * lm_loss(model, lm_batch) + 0.5 * lm_loss(model, prompt_batch)


def param_groups(model: LM) -> dict[str, list[nn.Parameter]]:
    """Parameters by role, for per-group gradient norms: embedding, discrete blocks, ode blocks, head."""
    groups: dict[str, list[nn.Parameter]] = {
        "embedding": [*model.tok_emb.parameters(), *model.pos_emb.parameters()],
        "blocks": [p for b in model.blocks if not isinstance(b, ODEFlowBlock) for p in b.parameters()],
        "ode": [p for b in model.blocks if isinstance(b, ODEFlowBlock) for p in b.parameters()],
        "head": [*model.ln_f.parameters(), *model.head.parameters()],
    }
    return {name: ps for name, ps in groups.items() if ps}


def count_params(model: nn.Module) -> int:
    """Parameters that take part in the function (an LM's spare head rows are left out)."""
    return sum(p.numel() for p in model.parameters()) - getattr(model, "n_spare_params", 0)


def block_params(model: LM) -> int:
    """Parameters of the blocks: what a model adds to the embeddings, final LayerNorm and head that every model of a
    study shares (the "non-embedding" parameters of a scaling law; a compression ratio's terms)."""
    return sum(p.numel() for p in model.blocks.parameters())
