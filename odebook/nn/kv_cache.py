"""A key/value cache for incremental decoding, shared by every attention evaluation of a forward pass.

A forward pass that carries the cache calls its attentions in a fixed order — the layers of a transformer, and for
a fixed-grid ODE block every stage of every step at its known time — so the i-th attention call of each pass owns
slot i: the keys and values of all earlier positions *at that same evaluation*. Causality makes this exact: a
position's state at any evaluation depends only on the positions before it, which do not change as tokens are
appended. Buffers are allocated once per slot for ``max_len`` positions.
"""

from __future__ import annotations

import torch

__all__ = ["KVCache"]


class KVCache:
    def __init__(self, max_len: int):
        self.max_len = max_len
        self.length = 0  # positions already cached
        self._slots: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._next = 0
        self._new = 0
        self.n_slots: int | None = None  # attention calls per pass, fixed by the first pass

    def begin(self, n_new: int) -> None:
        """Start a forward pass over ``n_new`` new positions."""
        if self.length + n_new > self.max_len:
            raise ValueError(f"the KV cache holds {self.max_len} positions (the model's max_seq_len); "
                             f"{self.length} cached + {n_new} new exceed it")
        self._next, self._new = 0, n_new

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this call's keys and values [B, H, T_new, D]; return those of every position so far."""
        i, start, end = self._next, self.length, self.length + k.shape[2]
        self._next += 1
        if i == len(self._slots):
            if self.n_slots is not None:
                raise RuntimeError("a forward pass made more attention calls than the first one; the cache needs "
                                   "the same evaluations in the same order every pass")
            shape = (*k.shape[:2], self.max_len, k.shape[3])
            self._slots.append((k.new_empty(shape), v.new_empty(shape)))
        kb, vb = self._slots[i]
        kb[:, :, start:end], vb[:, :, start:end] = k, v
        return kb[:, :, :end], vb[:, :, :end]

    def end(self) -> None:
        """Finish the pass: the new positions are now cached."""
        if self.n_slots is None:
            self.n_slots = self._next
        elif self._next != self.n_slots:
            raise RuntimeError(f"a forward pass made {self._next} attention calls, the first made {self.n_slots}")
        self.length += self._new
