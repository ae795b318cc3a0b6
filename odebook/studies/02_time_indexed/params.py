"""Study 02's parameters: which arms train, their architecture, the learning-rate grid, margins and timing."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from odebook.nn.hypernet import TIME_MLPS
from odebook.nn.modulated import NORMS
from odebook.params.lm import TextCorpusParams
from odebook.params.schema import spec

from .arms import ARMS, Config

__all__ = ["TIME_INDEXED_MODELS", "TimeIndexedParams"]

TIME_INDEXED_MODELS = tuple(ARMS)  # every arm (this study's arms module)


@dataclasses.dataclass
class TimeIndexedParams(TextCorpusParams):
    """Study 02: full time-dependent weights (Tong et al.) vs shared weights modulated by depth vs a transformer.

    Defaults are the source's configuration (the t4 profile)."""

    groups: ClassVar = {"architecture": ("d_model", "n_layer", "n_freq", "d_emb", "gate_width", "d_state",
                                         "rediscretize", "norm", "tong_time_mlp")}
    defaults: ClassVar[Mapping[str, Any]] = {
        "n_seeds": 12, "looks": [4, 8], "tuning_seeds": 2, "tokenizer": 'bytes', "seq_len": 128, "max_seq_len": 128,
        "batch_size": 8, "steps": 1000, "weight_decay": 0.0, "eval_interval": 100}

    models: list[str] = spec(list(TIME_INDEXED_MODELS), choices=TIME_INDEXED_MODELS,
                             help="which models to train; the primary claims need standard, tong, ti_mlp, "
                                  "ti_mlp_constant, ti_ssm, their negative controls ti_mlp_twin and "
                                  "ti_ssm_memoryless (a claim whose arms are missing is left out)")
    d_model: int = spec(256, ge=8)
    n_layer: int = spec(6, ge=1, le=48, help="layers of the standard transformer = depth steps of the others")
    n_freq: int = spec(16, ge=1, help="S: frequencies of the sinusoidal depth embedding")
    d_emb: int = spec(32, ge=1, help="width of Tong's time embedding")
    gate_width: int = spec(32, ge=1, help="hidden width of the gate MLPs")
    d_state: int = spec(16, ge=1, help="state size N of the SSM")
    rediscretize: list[int] = spec([3, 12], ge=1, help="depth steps at which ODE-style models are re-evaluated")
    norm: str = spec("static", choices=NORMS, help="LayerNorms of the gated models: static (default), or temporal "
                                                   "as the source's time-indexed MLP")
    tong_time_mlp: str = spec("shared", choices=TIME_MLPS, help="Tong's block: one time MLP for all generators "
                                                                "(default), or one per linear as Tong's code")
    lr_grid: list[float] = spec([5e-4, 1e-3, 2e-3], gt=0.0, le=1.0,
                                help="learning rates tried per model on the tuning seeds; the lowest mean final "
                                     "validation loss chooses (lr is not used)")
    lr_extensions: int = spec(2, ge=0, le=4, help="times a model's grid is extended one step past the edge it chose "
                                                  "(study.lr_grid); a choice still at an edge is flagged untuned")
    margin: float = spec(0.02, gt=0.0, help="smallest test-loss difference of interest, in nats, of every loss claim "
                                            "(superiority's futility side and the equivalence's ±margin)")
    timing_reps: int = spec(30, ge=20, help="interleaved timing pairs of the speed comparison (study.timing)")
    compression_target: float = spec(3.0, gt=1.0, help="'far fewer parameters': block parameters of the standard "
                                                       "transformer over the model's, at least this")
    dynamics_sequences: int = spec(2, ge=1, help="held-out sequences of the dynamics analysis")
    dynamics_tokens: int = spec(8, ge=1, help="tokens per sequence of the dynamics analysis")

    @classmethod
    def cell_fields(cls) -> tuple[str, ...]:
        """The parameters cell's settings, less ``models``: its default is every arm of the arms module, written there
        once, so an arm added there trains without an edit to the notebook (a profile, ``-p`` or a line added to the
        cell names a subset)."""
        return tuple(k for k in super().cell_fields() if k != "models")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if len(set(self.models)) != len(self.models) or not self.models:
            errors.append(f"key 'models' = {self.models}: must name each model at most once, at least one")
        if len(set(self.lr_grid)) != len(self.lr_grid) or not self.lr_grid:
            errors.append(f"key 'lr_grid' = {self.lr_grid}: must name each rate at most once, at least one")
        return errors

    def model_config(self, vocab_size: int) -> Config:
        """Every arm of this study (the arms module's Config: ``.build(name)``)."""
        return Config(vocab_size=vocab_size, d_model=self.d_model, n_head=self.n_head, n_layer=self.n_layer,
                                 max_seq_len=self.max_seq_len, n_freq=self.n_freq, d_emb=self.d_emb,
                                 gate_width=self.gate_width, d_state=self.d_state, norm=self.norm,
                                 tong_time_mlp=self.tong_time_mlp)

    def arms(self, vocab_size: int) -> dict:
        """Each model of ``models`` by name: what builds it."""
        cfg = self.model_config(vocab_size)
        return {name: functools.partial(cfg.build, name) for name in self.models}
