"""The fields and checks every study that trains language models on a corpus shares."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from odebook.params.schema import Params, spec

__all__ = ["LMParams", "TextCorpusParams"]


def _data_problems(corpus: str, tokenizer: str, files: dict, seq_len: int) -> list[str]:
    from odebook.data.corpus import DataError, check_data
    from odebook.data.own_corpus import file_problems
    from odebook.data.split_check import short_splits

    if corpus == "files":
        problems = file_problems(**files)
        if problems:
            return problems

    try:
        check_data(corpus, tokenizer)
    except DataError as err:
        return [f"key 'corpus' = {corpus!r}: {err}"]
    return short_splits(corpus, tokenizer, seq_len, **files)


@dataclasses.dataclass
class LMParams(Params):
    """Fields and checks of every study that trains language models on a corpus; studies override defaults."""

    groups: ClassVar = {"text": ("corpus", "tokenizer"), "architecture": ("n_head", "max_seq_len"),
                        "training": ("seq_len", "batch_size", "steps", "lr", "weight_decay", "grad_clip",
                                     "eval_interval", "eval_batches")}

    corpus: str = spec("wikitext2", choices=("wikitext2",))
    tokenizer: str = spec("gpt2", choices=("gpt2", "bytes"))
    n_head: int = spec(4, ge=1)
    seq_len: int = spec(64, ge=2, help="training and evaluation context")
    max_seq_len: int = spec(64, ge=2, help="size of the positional embedding")
    batch_size: int = spec(32, ge=1)
    steps: int = spec(500, ge=1)
    lr: float = spec(3e-4, gt=0.0, le=1.0)
    weight_decay: float = spec(0.1, ge=0.0)
    grad_clip: float = spec(1.0, gt=0.0)
    eval_interval: int = spec(50, ge=1)
    eval_batches: int = spec(20, ge=1, help="fixed held-out batches evaluated at every interval")
    tensorboard: bool = spec(False, operational=True, machine=True,
                             help="also write TensorBoard logs to <output_dir>/tensorboard/")
    checkpoint_interval: int = spec(100, ge=0, operational=True, machine=True,
                                    help="steps between checkpoints of each run (resumed on a re-run); 0 = none")
    checkpoint_dir: str = spec("", path="writes", operational=True, machine=True,
                               help="where runs keep checkpoints; empty = <output_dir>/checkpoints")
    fresh: bool = spec(False, operational=True, machine=True,
                       help="ignore stored checkpoints: train every run from the start")
    alpha: float = spec(0.05, gt=0.0, le=0.5, help="family-wise significance level (Holm) of the study's verdicts")

    width_key: ClassVar[str] = "d_model"  # the field holding the model width(s) that n_head must divide

    def cross_checks(self) -> list[str]:
        errors = []
        widths = getattr(self, self.width_key)
        if any(w % self.n_head for w in (widths if isinstance(widths, list) else [widths])):
            errors.append(f"key 'n_head' = {self.n_head}: must divide {self.width_key} = {widths}")
        if self.seq_len > self.max_seq_len:
            errors.append(f"key 'seq_len' = {self.seq_len}: must be <= max_seq_len = {self.max_seq_len}")
        if self.eval_interval > self.steps:
            errors.append(f"key 'eval_interval' = {self.eval_interval}: must be <= steps = {self.steps}")
        return errors + _data_problems(self.corpus, self.tokenizer, self.corpus_files(), self.seq_len)

    def corpus_files(self) -> dict:
        """The own-text keys (none here; see TextCorpusParams), as ``data.load_corpus(p.corpus, **p.corpus_files())``
        takes them."""
        return {}

    def data_files(self) -> list:
        """The local files these parameters make a run read (odebook.data.mirror.data_files)."""
        from odebook.data.mirror import data_files

        return data_files(self.corpus, self.tokenizer, **self.corpus_files())


@dataclasses.dataclass
class TextCorpusParams(LMParams):
    """Studies that train on running text (01, 02, 05): WikiText-2, WikiText-103 from the hub, or one's own files."""

    groups: ClassVar = {"text": ("train_file", "valid_file", "test_file", "text_file", "split_fractions")}

    corpus: str = spec("wikitext2", choices=("wikitext2", "wikitext103", "files"),
                       help="wikitext103 comes from the hub; files = your own text, named by the keys below")
    train_file: str = spec("", path=True, help="corpus files: absolute path of the training text")
    valid_file: str = spec("", path=True, help="corpus files: absolute path of the validation text")
    test_file: str = spec("", path=True, help="corpus files: absolute path of the test text")
    text_file: str = spec("", path=True, help="corpus files: instead of the three, one text cut at line breaks by "
                          "split_fractions")
    split_fractions: list[float] = spec([0.9, 0.05, 0.05], ge=0.0, le=1.0,
                                        help="train, validation, test shares of text_file; sum 1")

    def corpus_files(self) -> dict:
        return {k: getattr(self, k) for k in ("train_file", "valid_file", "test_file", "text_file", "split_fractions")}
