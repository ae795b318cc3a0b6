"""Causal multi-head self-attention (SDPA, optionally over a sliding window) and the 4x GELU MLP."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn.gdn import ShortConv
from odebook.nn.gemm import Linear, linear
from odebook.nn.kv_cache import KVCache

__all__ = ["CausalSelfAttention", "MLP", "attention_reference", "causal_attention", "gelu_mlp", "banded_causal_mask",
           "SlidingWindowAttention"]


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plain causal attention: softmax(q kᵀ / √d + causal mask) v, for q, k, v of shape [B, H, T, D]."""
    T, D = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # [B, H, T, T]
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(-1) @ v


def causal_attention(x: torch.Tensor, qkv_w: torch.Tensor, qkv_b: torch.Tensor | None, proj_w: torch.Tensor,
                     proj_b: torch.Tensor | None, n_head: int, dropout: float = 0.0,
                     window: int | None = None) -> torch.Tensor:
    """Causal multi-head attention with explicit weights (for generated or gated weights): x [B, T, C]. With
    ``window``, each position sees only the last ``window`` positions (a banded causal mask). The projections go
    through odebook.nn.gemm.linear (oneDNN on the CPU)."""
    B, T, C = x.shape
    q, k, v = linear(x, qkv_w, qkv_b).view(B, T, 3, n_head, C // n_head).permute(2, 0, 3, 1, 4)
    if window is None:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
    else:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=banded_causal_mask(T, window, x.device),
                                           dropout_p=dropout)
    return linear(y.transpose(1, 2).reshape(B, T, C), proj_w, proj_b)


def gelu_mlp(x: torch.Tensor, fc_w: torch.Tensor, fc_b: torch.Tensor | None, proj_w: torch.Tensor,
             proj_b: torch.Tensor | None) -> torch.Tensor:
    """Linear → GELU → Linear with explicit weights."""
    return linear(F.gelu(linear(x, fc_w, fc_b)), proj_w, proj_b)


class CausalSelfAttention(nn.Module):
    """Multi-head attention in which position i sees positions ≤ i (scaled_dot_product_attention, is_causal). With
    ``conv_width``, its input first passes the Gated DeltaNet's short causal depthwise convolution
    (odebook.nn.gdn.ShortConv: position i mixes i − conv_width + 1 … i), so an attention stack and a GDN stack share
    their token-mixing front and differ in their memory only."""

    def __init__(self, *, d_model: int, n_head: int, dropout: float = 0.0, conv_width: int = 0):
        super().__init__()
        assert d_model % n_head == 0, "n_head must divide d_model"
        self.n_head, self.dropout = n_head, dropout
        self.window: int | None = None  # None: full causal attention (SlidingWindowAttention sets it)
        self.conv = ShortConv(d_model, conv_width) if conv_width else None
        self.qkv = Linear(d_model, 3 * d_model)
        self.proj = Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(dropout)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        return q, k, v  # each [B, H, T, D]

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """x: [B, T, C]. With ``cache``, x holds only the new positions, which attend to every cached one."""
        if cache is not None:
            return self.proj(self._cached(x, cache))
        if self.conv is not None:
            x = self.conv(x)
        y = causal_attention(x, self.qkv.weight, self.qkv.bias, self.proj.weight, self.proj.bias, self.n_head,
                             self.dropout if self.training else 0.0, self.window)
        return self.resid_dropout(y)

    def cache_problem(self) -> str | None:
        """Why this attention cannot decode with a KV cache, or None: the one rule (odebook.models.lm asks it too)."""
        if self.conv is not None:
            return "a short convolution in front (the KV cache holds no convolution state)"
        return None if self.window is None else "a sliding window (the KV cache is for full causal attention)"

    def _cached(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        if (problem := self.cache_problem()) is not None:
            raise ValueError(f"cannot decode with a KV cache: {problem}")
        B, T, C = x.shape
        offset = cache.length
        q, k, v = self.heads(x)
        k, v = cache.update(k, v)  # [B, H, offset + T, D]
        mask = None  # one new position sees every cached one; several: new position i sees positions ≤ i
        if T > 1:
            i = torch.arange(T, device=x.device)[:, None] + offset
            mask = torch.arange(offset + T, device=x.device)[None, :] <= i
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return y.transpose(1, 2).reshape(B, T, C)


class MLP(nn.Module):
    """Linear(d → 4d) → GELU → Linear(4d → d) → dropout."""

    def __init__(self, *, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.fc = Linear(d_model, 4 * d_model)
        self.proj = Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(gelu_mlp(x, self.fc.weight, self.fc.bias, self.proj.weight, self.proj.bias))


def banded_causal_mask(T: int, window: int, device=None) -> torch.Tensor:
    """[T, T] bool, True where query i may attend key j: i − window < j ≤ i."""
    i = torch.arange(T, device=device)
    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)


class SlidingWindowAttention(CausalSelfAttention):
    """Causal attention over the last ``window`` positions: SDPA with a banded causal mask (fla's sliding-window
    attention calls FlashAttention, which a T4 cannot run). With ``conv_width``, the short convolution in front
    (as ``CausalSelfAttention``) widens what position i sees to i − window − conv_width + 2 … i."""

    def __init__(self, *, d_model: int, n_head: int, window: int, dropout: float = 0.0, conv_width: int = 0):
        super().__init__(d_model=d_model, n_head=n_head, dropout=dropout, conv_width=conv_width)
        self.window = window


