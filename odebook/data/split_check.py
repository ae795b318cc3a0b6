"""Every split must hold one window of ``seq_len + 1`` tokens; checked with the parameters, before any compute, and
said with the split and the file it came from (the batches' own check, at run time, knows neither).

Local text only (the mirror's files of the corpus, or one's own files); data from the hub are the published splits.
A file of at least ``SURE_BYTES`` bytes per window token holds a window whatever the tokenizer (no GPT-2 token is that
long); a smaller one is tokenized, once per change of the file."""

from __future__ import annotations

import functools
from pathlib import Path

from odebook.data.mirror import MIRROR_FILES, mirror_dir

__all__ = ["short_splits"]

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
