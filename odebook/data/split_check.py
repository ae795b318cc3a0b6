"""Every split must hold one window of ``seq_len + 1`` tokens; checked with the parameters, before any compute, and
said with the split and the file it came from (the batches' own check, at run time, knows neither).

Local text only (the mirror's files of the corpus, or one's own files); data from the hub are the published splits.
A file of at least ``SURE_BYTES`` bytes per window token holds a window whatever the tokenizer (no GPT-2 token is that
long); a smaller one is tokenized, once per change of the file."""

from __future__ import annotations

import functools
from pathlib import Path

from odebook.data.mirror import MIRROR_FILES, _stat, mirror_dir  # _stat: the mirror checks' cache key

__all__ = ["short_splits", "few_stories"]

SPLITS = ("train", "validation", "test")
SURE_BYTES = 256  # more bytes than the longest GPT-2 token has


def short_splits(corpus: str, tokenizer: str, seq_len: int, **files: object) -> list[str]:
    """One line per split that holds fewer than ``seq_len + 1`` tokens, naming the split and its file."""
    window, problems = seq_len + 1, []
    for split, where, text in _local_splits(corpus, files, SURE_BYTES * window):
        if text is None or len(text.encode("utf-8")) >= SURE_BYTES * window:
            continue
        n = _count(text, tokenizer)
        if n <= window:  # the batches draw windows from a split longer than one
            problems.append(f"key 'seq_len' = {seq_len}: the {split} split ({where}) has {n} {tokenizer} tokens; "
                            f"batches need more than one window of {window} (seq_len + 1): give a longer file or a "
                            "smaller seq_len")
    return problems


def _local_splits(corpus: str, files: dict, enough: int) -> list[tuple[str, str, str | None]]:
    """(split, where it came from, its text or None when the file has ``enough`` bytes) for each split read from
    local files; [] for data from the hub."""
    from odebook.data.own_corpus import split_text

    if corpus == "files" and files.get("text_file"):
        path = Path(str(files["text_file"])).expanduser()
        parts = split_text(path.read_text(encoding="utf-8"), list(files["split_fractions"]))
        return [(s, f"part of {path}", t) for s, t in zip(SPLITS, parts)]
    if corpus == "files":
        paths = [Path(str(files[k])).expanduser() for k in ("train_file", "valid_file", "test_file")]
    elif (root := mirror_dir()) is not None and corpus in MIRROR_FILES and len(MIRROR_FILES[corpus]) == 3:
        paths = [root / name for name in MIRROR_FILES[corpus]]
    else:
        return []
    return [(s, str(p), p.read_text(encoding="utf-8") if p.stat().st_size < enough else None)
            for s, p in zip(SPLITS, paths)]


@functools.lru_cache(maxsize=16)
def _count(text: str, tokenizer: str) -> int:
    from odebook.data.corpus import get_tokenizer

    return len(get_tokenizer(tokenizer).encode(text))


def few_stories(batch_size: int, eval_batches: int) -> list[str]:
    """A story corpus's documents: with a mirror, its validation text must hold the ``eval_batches × batch_size``
    stories the held-out loss is averaged over, and its training text a batch of stories — one line each, naming the
    file (a one-story validation set would give a held-out perplexity of one document)."""
    root = mirror_dir()
    if root is None:
        return []
    train, valid = _stories(*(_stat(root / name) for name in MIRROR_FILES["tinystories"]))
    problems = []
    for n, needed, name, key in ((valid, batch_size * eval_batches, MIRROR_FILES["tinystories"][1], "eval_batches"),
                                 (train, batch_size, MIRROR_FILES["tinystories"][0], "batch_size")):
        if n < needed:
            problems.append(f"key {key!r}: {root / name} holds {n} stor{'y' if n == 1 else 'ies'} (blocks of at least "
                            f"two characters); the study needs {needed} (eval_batches × batch_size for validation, "
                            "batch_size for training): give the whole file or lower the key")
    return problems


@functools.lru_cache(maxsize=4)
def _stories(train: tuple[str, int, int], valid: tuple[str, int, int]) -> tuple[int, int]:
    """(training, validation) stories of at least two characters in the mirror, counted once per change of a file."""
    from odebook.data.corpus import mirror_stories

    docs = mirror_stories(Path(train[0]).parent.parent)
    return tuple(sum(len(d) >= 2 for d in part) for part in docs)  # type: ignore[return-value]
