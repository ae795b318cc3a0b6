"""Study 04's parameters: the hybrid's pattern and width, its local-path arms and training regimes, the no-state
control, the targets and sampling."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from odebook.models.configs import PatternConfig
from odebook.models.local_paths import LOCAL_PATHS
from odebook.params.retrieval import ABLATIONS, RetrievalParams
from odebook.params.schema import spec

__all__ = ["MixedTrainingParams"]


@dataclasses.dataclass
class MixedTrainingParams(RetrievalParams):
    """Study 04: what makes a GDN + sliding-window hybrid use its GDN state — bottleneck × training regime.

    Defaults are the source's configuration (the t4 profile)."""

    groups: ClassVar = {"text": ("max_train_stories",), "architecture": ("pattern", "d_model"),
                        "sampling": ("n_samples", "sample_tokens", "temperature", "top_k")}

    corpus: str = spec("tinystories", choices=("tinystories",),
                       help="the language-model corpus (checked before compute)")
    pattern: str = spec("GGGGGS", help="G = Gated DeltaNet, S = sliding-window attention reading the GDN state")
    d_model: int = spec(256, ge=8)
    bottlenecks: list[str] = spec(["static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted"],
                                  choices=tuple(LOCAL_PATHS), help="local path arms (odebook.models.local_paths)")
    regimes: list[str] = spec(["lm", "retrieval", "mixed"], choices=("lm", "retrieval", "mixed"))
    control: bool = spec(True, help="also train the no-state control (every G layer replaced by sliding-window "
                         "attention behind the G layer's short convolution: a window instead of a state, with its "
                         "own projections)")
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

    def arms(self) -> dict[str, PatternConfig]:
        """The study's arms by name: each bottleneck of ``bottlenecks``, then (with ``control``) the no-state control,
        every G layer a W layer (sliding-window attention behind the same short convolution; ``state_read`` False)."""
        arms = {arm: self.model_config(self.pattern, d_model=self.d_model, local_path=arm) for arm in self.bottlenecks}
        return arms | ({"control": self.model_config(self.pattern.replace("G", "W"), d_model=self.d_model)}
                       if self.control else {})

    def runs(self, tok) -> list:
        """What the study runs (odebook.params.plan, for its budget): every arm in every regime on every seed —
        language-model windows, the retrieval curriculum or both, evaluated on held-out text and scored on the
        retrieval sets under each ablation it has (odebook.study.retrieval.score_rows)."""
        import functools

        from odebook.models.lm import mixed_loss
        from odebook.params import plan as w

        windows = w.token_windows(tok.vocab_size, self.batch_size, self.seq_len)
        prompts = functools.partial(w.prompts, tok, self.retrieval_batch_size, self.ks)
        train = {"lm": (w.Work(self.steps, windows),), "retrieval": w.curriculum_work(self, self.steps, prompts),
                 "mixed": w.curriculum_work(self, self.steps, lambda n: lambda: (windows(), prompts(n)()), mixed_loss)}
        # every evaluation and the held-out perplexity at the end
        valid = w.Work((w.evaluations(self.steps, self.eval_interval) + 1) * self.eval_batches, windows, train=False)
        return [w.Runs("hybrid" if arm.state_read else "control", arm.build, self.n_seeds,
                       (*train[regime], valid, *w.scoring_work(self, tok, len(ABLATIONS) if arm.state_read else 2)))
                for arm in self.arms().values() for regime in self.regimes]
