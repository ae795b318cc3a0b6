"""The configuration of a stack written as a pattern of layers: a frozen dataclass made by a study's parameters
(``model_config`` and friends), which hold every default — it holds none. The ODE hybrid has its own
(odebook.models.arms.HybridConfig)."""

from __future__ import annotations

import dataclasses

from odebook.models.lm import LM, pattern_lm
from odebook.models.local_paths import LocalPath

__all__ = ["PatternConfig"]


@dataclasses.dataclass(frozen=True)
class PatternConfig:
    """A stack written as a pattern of layers (odebook.models.lm.pattern_lm): a GDN ladder, a hybrid and its
    controls. ``state_read``: its S layers read the GDN state, through ``local_path``'s bottleneck."""

    pattern: str
    vocab_size: int
    d_model: int
    n_head: int
    max_seq_len: int
    window: int
    chunk_size: int
    state_read: bool
    local_path: LocalPath

    def build(self) -> LM:
        return pattern_lm(self.pattern, vocab_size=self.vocab_size, d_model=self.d_model, n_head=self.n_head,
                          max_seq_len=self.max_seq_len, window=self.window, chunk_size=self.chunk_size,
                          state_read=self.state_read, local_path=self.local_path)
