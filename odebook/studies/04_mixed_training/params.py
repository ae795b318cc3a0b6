"""Study 04's parameters: the hybrid's pattern and width, its local-path arms, the dropped-output arm, the training
regimes, the no-state control and the reaching comparator, the learning-rate grid, the targets and sampling; its
models' vocabulary (vocabulary.used_tokens)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from odebook.models.configs import PatternConfig
from odebook.models.local_paths import LOCAL_PATHS
from odebook.params.retrieval import RetrievalParams
from odebook.params.schema import spec

from .output_drop import OutputDropConfig
from .vocabulary import UsedTokens, used_tokens

__all__ = ["MixedTrainingParams"]


@dataclasses.dataclass
class MixedTrainingParams(RetrievalParams):
    """Study 04: what makes a GDN + sliding-window hybrid use its GDN state — bottleneck × training regime.

    Defaults are the source's configuration (the t4 profile)."""

    groups: ClassVar = {"text": ("max_train_stories",), "architecture": ("pattern", "d_model"),
                        "tuning": ("lr_grid", "lr_extensions", "lr_tie"),
                        "sampling": ("n_samples", "sample_tokens", "temperature", "top_k")}
    defaults: ClassVar = {"tuning_seeds": 2}

    corpus: str = spec("tinystories", choices=("tinystories",),
                       help="the language-model corpus (checked before compute)")
    pattern: str = spec("GGGGGS", help="G = Gated DeltaNet, S = sliding-window attention reading the GDN state")
    d_model: int = spec(256, ge=8)
    bottlenecks: list[str] = spec(["static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted"],
                                  choices=tuple(LOCAL_PATHS), help="local path arms (odebook.models.local_paths)")
    regimes: list[str] = spec(["lm", "retrieval", "mixed"], choices=("lm", "retrieval", "mixed"))
    output_drop: float = spec(0.7, ge=0.0, le=0.95, help="also train the source's drop arm (drop_0.7) with its GDN "
                              "layers' direct output dropped per sequence with this probability in training (scaled "
                              "by 1 − p at inference), so that far facts pass through the state read; 0: no such arm")
    control: bool = spec(True, help="also train the no-state control (every G layer replaced by sliding-window "
                         "attention behind the G layer's short convolution: a window instead of a state, with its "
                         "own projections)")
    comparator: bool = spec(True, help="also train the reaching comparator 'attention': every G layer full causal "
                            "attention behind the G layer's short convolution (C), which sees every fact")
    lr_grid: list[float] = spec([5e-4, 1e-3, 2e-3], gt=0.0, le=1.0,
                                help="learning rates every arm tries on the tuning seeds; the lowest mean final "
                                     "validation loss of held-out prompts' answers (language modelling alone: of "
                                     "held-out windows) chooses (lr is not used)")
    lr_extensions: int = spec(2, ge=0, le=4, help="times an arm's grid is extended one step past the edge it chose "
                                                  "(study.lr_grid); a choice still at an edge is flagged untuned")
    lr_tie: float = spec(0.02, ge=0.0, help="nats of mean final validation loss within which rates tie the lowest; "
                         "the middle of the tied rates is chosen (study.lr_grid.choose)")
    max_train_stories: int = spec(50_000, ge=1)
    ppl_target: float = spec(5.0, gt=1.0, help="the source's target for held-out perplexity")
    delta_target: float = spec(0.15, gt=0.0, le=1.0, help="the source's target for Delta (15 points): the margin of "
                               "the retrieval claims")
    ppl_margin: float = spec(0.1, gt=0.0, help="margin of 'mixed training keeps fluency' (nats of held-out loss)")
    n_samples: int = spec(3, ge=0)
    sample_tokens: int = spec(120, ge=1)
    temperature: float = spec(0.8, ge=0.0, help="sampling temperature of the samples (0: greedy)")
    top_k: int = spec(40, ge=1, help="sample from the top k tokens")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if not self.pattern or set(self.pattern) - {"G", "S"} or self.pattern[0] != "G":
            errors.append(f"key 'pattern' = {self.pattern!r}: letters G and S, starting with G")
        from odebook.data.split_check import few_stories

        return errors + ([] if errors else few_stories(self.batch_size, self.eval_batches))

    def vocabulary(self) -> UsedTokens:
        """The tokens the models know: ``tokenizer``'s that the training stories and the retrieval task use."""
        return used_tokens(self.tokenizer, self.max_train_stories)

    def model_config(self, pattern: str, **kwargs) -> PatternConfig:
        return dataclasses.replace(super().model_config(pattern, **kwargs), vocab_size=self.vocabulary().vocab_size)

    def arms(self) -> dict[str, PatternConfig]:
        """The study's arms by name: each bottleneck of ``bottlenecks``; with ``output_drop``, drop_0.7 with its GDN
        output dropped ("drop_0.7+out_<p>"); with ``control``, the no-state control (every G layer a W layer:
        sliding-window attention behind the same short convolution; ``state_read`` False); with ``comparator``,
        "attention" (every G layer a C layer: full causal attention behind that convolution)."""
        arms = {arm: self.model_config(self.pattern, d_model=self.d_model, local_path=arm) for arm in self.bottlenecks}
        if self.output_drop:
            source = self.model_config(self.pattern, d_model=self.d_model, local_path="drop_0.7")
            arms[f"drop_0.7+out_{self.output_drop:g}"] = OutputDropConfig(**vars(source), output_drop=self.output_drop)
        if self.control:
            arms["control"] = self.model_config(self.pattern.replace("G", "W"), d_model=self.d_model)
        if self.comparator:
            arms["attention"] = self.model_config(self.pattern.replace("G", "C"), d_model=self.d_model)
        return arms
