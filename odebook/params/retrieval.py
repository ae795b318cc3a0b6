"""The retrieval studies' floor: the binding-retrieval task's parameters, the hybrid stacks they build, and the
ablations they score under."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from odebook.models.configs import PatternConfig
from odebook.nn.gdn import Ablation
from odebook.models.local_paths import LOCAL_PATHS
from odebook.params.lm import LMParams
from odebook.params.schema import spec

__all__ = ["RetrievalParams", "ABLATIONS"]

# The ablations of the retrieval studies (what a forward pass replaces, and by what; odebook.nn.gdn.Ablation). Zeroing
# puts a value no prompt produces, so accuracy under it may fall below chance; the batch mean and another prompt's
# value ("resampled") remove what is specific to the prompt and keep the component's typical contribution.
ABLATIONS: dict[str, Ablation] = {
    "normal": Ablation(),
    "state zeroed": Ablation(gdn_state=True, state_read=True),  # every read of any GDN state
    "state read zeroed": Ablation(state_read=True),  # only the state-reading layer's read
    "local zeroed": Ablation(local=True),  # every sliding-window output
    "both zeroed": Ablation(gdn_state=True, state_read=True, local=True),
    **{f"state {how}": Ablation(gdn_state=mode, state_read=mode) for how, mode in (("mean", "mean"),
                                                                                   ("resampled", "resample"))},
    **{f"state read {how}": Ablation(state_read=mode) for how, mode in (("mean", "mean"), ("resampled", "resample"))},
    "gdn output resampled": Ablation(gdn_state="resample"),  # each GDN layer's own read-out only: the read is kept
}


def _length_problems(ks: list[int], curriculum: list[int], tokenizer: str, max_seq_len: int) -> list[str]:
    """The longest retrieval prompt must fit the positional table."""
    from odebook.data.corpus import DataError, get_tokenizer
    from odebook.data.tasks import max_prompt_tokens

    try:
        longest = max_prompt_tokens(max(ks), max(curriculum), get_tokenizer(tokenizer))
    except DataError:
        return []  # reported by the data check already
    if longest <= max_seq_len:
        return []
    return [f"key 'max_seq_len' = {max_seq_len}: retrieval prompts with {max(ks)} bindings and {max(curriculum)} "
            f"filler sentences can reach {longest} {tokenizer} tokens"]


@dataclasses.dataclass
class RetrievalParams(LMParams):
    """Fields and checks of the studies that also train on the binding-retrieval task (odebook.data.tasks)."""

    groups: ClassVar = {"architecture": ("window", "chunk_size"),
                        "retrieval_task": ("ks", "curriculum", "retrieval_batch_size", "retrieval_eval_examples",
                                           "eval_seed")}

    defaults: ClassVar[Mapping[str, Any]] = {"n_seeds": 3, "seq_len": 256, "max_seq_len": 1024, "batch_size": 16,
                                             "steps": 1000, "lr": 1e-3, "eval_interval": 100}

    window: int = spec(64, ge=1, help="sliding-window length; distances are binned relative to it")
    chunk_size: int = spec(64, ge=1, help="chunk of the pure-PyTorch gated delta rule (CPU path; CUDA uses fla-core)")
    ks: list[int] = spec([2, 4], ge=1, le=8, help="bindings per prompt: drawn from these in training, each scored")
    curriculum: list[int] = spec([0, 10, 30, 50, 100], ge=0, help="filler sentences per stage, growing over training")
    retrieval_batch_size: int = spec(16, ge=1, help="retrieval prompts per training step")
    retrieval_eval_examples: int = spec(500, ge=1, help="examples per evaluation set")
    eval_seed: int = spec(10_000, ge=0, help="seed of the evaluation examples, apart from training seeds")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if max(self.ks) > 8:
            errors.append(f"key 'ks' = {self.ks}: at most 8 bindings (distinct colours)")
        return errors + ([] if errors else _length_problems(self.ks, self.curriculum, self.tokenizer, self.max_seq_len))

    def model_config(self, pattern: str, *, d_model: int, local_path: str | None = None) -> PatternConfig:
        """The stack ``pattern`` at width ``d_model`` (odebook.models.configs.PatternConfig); with ``local_path`` (a
        name in odebook.models.local_paths.LOCAL_PATHS) its S layers read the GDN state through that bottleneck."""
        from odebook.data.corpus import get_tokenizer

        return PatternConfig(pattern=pattern, vocab_size=get_tokenizer(self.tokenizer).vocab_size, d_model=d_model,
                             n_head=self.n_head, max_seq_len=self.max_seq_len, window=self.window,
                             chunk_size=self.chunk_size, state_read=local_path is not None,
                             local_path=LOCAL_PATHS[local_path or "none"])
