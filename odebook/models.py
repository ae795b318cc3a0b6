"""One language-model assembly for every study: embeddings → a stack of blocks → LayerNorm → head.

Blocks share one signature, ``block(x, control=None) -> x``, so discrete layers, ODE flows and (later) recurrent
mixers stack freely; the embedding, head, loss and initialisation are the same for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn import Block, ODEFlowBlock

__all__ = ["LM", "gpt", "ode_hybrid", "lm_loss", "param_groups", "count_params"]

HEAD_MULTIPLE = 64  # the head's rows are padded to a multiple of this: 50,257 → 50,304 runs the matmul ~1.5× faster


class LM(nn.Module):
    """Token + learned positional embeddings → blocks → final LayerNorm → untied linear head.

    The head has ``vocab_size`` rounded up to HEAD_MULTIPLE rows for matmul speed; the logits are cut back to
    ``vocab_size``, so the spare rows never affect the output (nor receive a gradient) and are not counted."""

    def __init__(self, *, vocab_size: int, d_model: int, max_seq_len: int, blocks: Iterable[nn.Module],
                 dropout: float = 0.0):
        super().__init__()
        self.max_seq_len, self.vocab_size = max_seq_len, vocab_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_seq_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d_model)
        padded = -(-vocab_size // HEAD_MULTIPLE) * HEAD_MULTIPLE
        self.head = nn.Linear(d_model, padded, bias=False)
        self.n_spare_params = (padded - vocab_size) * d_model
        self.apply(_init_weights)

    def forward(self, idx: torch.Tensor, control: torch.Tensor | None = None) -> torch.Tensor:
        """idx: [B, T] token ids → logits [B, T, vocab]."""
        T = idx.shape[1]
        if T > self.max_seq_len:
            raise ValueError(f"sequence of {T} tokens exceeds max_seq_len = {self.max_seq_len}")
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x, control=control)
        return self.head(self.ln_f(x))[..., : self.vocab_size]


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
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
    first, last = ode_layers[0], ode_layers[-1]
    if list(ode_layers) != list(range(first, last + 1)) or not 0 <= first <= last < n_layer:
        raise ValueError(f"ode_layers must be consecutive indices in 0..{n_layer - 1}, got {list(ode_layers)}")
    blocks: list[nn.Module] = [Block(d_model=d_model, n_head=n_head, dropout=dropout) for _ in range(first)]
    blocks.append(ODEFlowBlock(d_model=d_model, n_head=n_head, **ode_options))
    blocks += [Block(d_model=d_model, n_head=n_head, dropout=dropout) for _ in range(last + 1, n_layer)]
    return LM(vocab_size=vocab_size, d_model=d_model, max_seq_len=max_seq_len, blocks=blocks, dropout=dropout)


def lm_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy; targets equal to -100 are ignored (padding)."""
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=-100)


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
