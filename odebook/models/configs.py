"""The model configurations of studies 02 (time-indexed models) and 03/04 (layer patterns): frozen dataclasses made
by the studies' parameters (``model_config`` and friends in odebook.params), which hold every default — these hold
none. Study 01/05's ODE hybrid has its own, with its arms (odebook.models.arms.HybridConfig)."""

from __future__ import annotations

import dataclasses

from odebook.models.lm import LM, pattern_lm, time_indexed
from odebook.models.local_paths import LocalPath

__all__ = ["TimeIndexedConfig", "PatternConfig"]


@dataclasses.dataclass(frozen=True)
class TimeIndexedConfig:
    """Everything that builds study 02's models (odebook.models.lm.time_indexed); ``build(name)`` makes one."""

    vocab_size: int
    d_model: int
    n_head: int
    n_layer: int
    max_seq_len: int
    n_freq: int
    d_emb: int
    gate_width: int
    d_state: int
    norm: str
    tong_time_mlp: str

    def build(self, name: str) -> LM:
        return time_indexed(name, **dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class PatternConfig:
    """A stack written as a pattern of layers (odebook.models.lm.pattern_lm): the ladder of study 03 and the arms of
    study 04. ``state_read``: its S layers read the GDN state, through ``local_path``'s bottleneck."""

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
