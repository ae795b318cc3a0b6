"""The local data mirror: where ``ODEBOOK_DATA`` points, which files each corpus needs there, and the check that they
are whole — present, not empty, not cut mid-line or inside a UTF-8 character, text rather than binary, and a
tiktoken cache whose checksums hold — before any compute starts."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from unittest import mock

from odebook.data.core import NOT_REGULAR, DataError, is_special

__all__ = ["DATA_ENV", "DataError", "MIRROR_FILES", "TIKTOKEN_DIR", "HOW_TO_PROVIDE", "mirror_dir", "pin_data_dir",
           "check_data", "data_files", "gpt2_from_mirror"]

DATA_ENV = "ODEBOOK_DATA"

# Files each corpus needs in a local mirror, relative to $ODEBOOK_DATA.
MIRROR_FILES = {
    "wikitext2": ("wikitext-2/wiki.train.tokens", "wikitext-2/wiki.valid.tokens", "wikitext-2/wiki.test.tokens"),
    "tinystories": ("tinystories/train-first-2MiB.txt", "tinystories/valid-blankline-separated.txt"),
}
TIKTOKEN_DIR = "tiktoken"

HOW_TO_PROVIDE = (f"Either connect to the internet (data come from the Hugging Face hub), or set {DATA_ENV} to a "
                  "local mirror laid out like ../shared/data (see its README), e.g. "
                  f"make run-all {DATA_ENV}=../shared/data (a relative path is read from the folder you type it in)")


def mirror_dir() -> Path | None:
    """The local mirror named by ``$ODEBOOK_DATA``, or None when it is unset."""
    value = os.environ.get(DATA_ENV)
    return Path(value).expanduser().resolve() if value else None


def pin_data_dir() -> Path | None:
    """Resolve ``$ODEBOOK_DATA`` once, from the folder the user typed it in (this process's working folder), and
    export it as an absolute path, so that every process started from here reads the same folder — the notebooks'
    kernels run in notebooks/. Entry points call it first (the runner; ``make lab`` does the same in make)."""
    root = mirror_dir()
    if root is not None:
        os.environ[DATA_ENV] = str(root)
    return root


def data_files(corpus: str, tokenizer: str, **own: object) -> list[Path]:
    """The local files a corpus and tokenizer are read from: one's own text files (corpus 'files'), and with a mirror
    its files for the corpus and its tiktoken cache. Data from the hub name no local file."""
    files = ([Path(str(v)).expanduser() for k, v in own.items() if k.endswith("_file") and v] if corpus == "files"
             else [])
    root = mirror_dir()
    if root is not None:
        files += [root / name for name in MIRROR_FILES.get(corpus, ())]
        files += [root / TIKTOKEN_DIR] if tokenizer == "gpt2" else []
    return files


def check_data(corpus: str, tokenizer: str) -> None:
    """Raise DataError when a local mirror is configured but lacks a file this corpus or tokenizer needs."""
    root = mirror_dir()
    if root is None:
        return
    if not root.is_dir():
        raise DataError(f"{DATA_ENV}={root} is not a directory. {HOW_TO_PROVIDE}")
    needed = list(MIRROR_FILES.get(corpus, ())) + ([TIKTOKEN_DIR] if tokenizer == "gpt2" else [])
    missing = [name for name in needed if not (root / name).exists()]
    if missing:
        raise DataError(f"{DATA_ENV}={root} has no {', '.join(missing)}. {HOW_TO_PROVIDE}")
    special = [name for name in needed if is_special(root / name) != (name == TIKTOKEN_DIR)]
    special += [f"{TIKTOKEN_DIR}/{p.name}" for p in (root / TIKTOKEN_DIR).iterdir() if is_special(p)] \
        if TIKTOKEN_DIR in needed and not special else []
    if special:  # said before any read: a FIFO blocks it for good, /dev/zero never ends
        what = "is not a folder" if special[0] == TIKTOKEN_DIR else NOT_REGULAR
        raise DataError(f"{DATA_ENV}={root}: {special[0]} {what}; replace it with a good copy (see the mirror's "
                        "README)")
    for name in MIRROR_FILES.get(corpus, ()):  # corpora the mirror does not hold come from the hub or files
        problem = _text_file_problem(*_stat(root / name))
        if problem:
            raise DataError(f"{DATA_ENV}={root}: {name} {problem}; replace it with a good copy (see the mirror's "
                            "README)")
    if tokenizer == "gpt2":
        problem = _tiktoken_cache_problem(*_stat(root / TIKTOKEN_DIR))
        if problem:
            raise DataError(f"{DATA_ENV}={root}: {TIKTOKEN_DIR}/ {problem}; replace it with a good copy (see the "
                            "mirror's README)")


# -- mirror integrity (cached by file size and modification time, so each file is read once per change) ----------
CUT_ON_PURPOSE = ("tinystories/train-first-2MiB.txt",)  # the mirror's first 2 MiB of a file: ends mid-story


def _stat(path: Path) -> tuple[str, int, int]:
    """(path, size, newest modification) of a file, or summed over a folder's files: the checks' cache key."""
    stats = [p.stat() for p in path.iterdir()] if path.is_dir() else [path.stat()]
    return str(path), sum(st.st_size for st in stats), max((st.st_mtime_ns for st in stats), default=0)


@functools.lru_cache(maxsize=32)
def _text_file_problem(path: str, size: int, mtime: int) -> str | None:
    """Why a mirror text file cannot be used (empty, not UTF-8, binary, cut mid-line), or None."""
    data = Path(path).read_bytes()
    if not data:
        return "is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = "ends inside a UTF-8 character (truncated)" if err.start >= len(data) - 3 else \
            f"is not UTF-8 text (byte {err.start})"
        return where
    if "\x00" in text:
        return "holds NUL bytes (not a text file)"
    if not text.endswith("\n") and not any(path.endswith(name) for name in CUT_ON_PURPOSE):
        return "does not end with a line break (truncated)"
    return None


def gpt2_from_mirror(cache: Path):
    """tiktoken's GPT-2 encoding read from the mirror's cache folder alone, whatever TIKTOKEN_CACHE_DIR says: a
    missing file or one whose sha256 is not the one tiktoken expects raises DataError; nothing is downloaded or
    deleted (tiktoken itself would do both)."""
    import tiktoken
    import tiktoken.load
    import tiktoken_ext.openai_public

    def from_mirror_only(blobpath: str, expected_hash: str | None = None) -> bytes:
        name = hashlib.sha1(blobpath.encode()).hexdigest()
        try:
            data = (cache / name).read_bytes()
        except OSError:
            raise DataError(f"has no {name} (tiktoken's cache of {blobpath})") from None
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise DataError(f"{name} (tiktoken's cache of {blobpath}) is damaged: its sha256 is not tiktoken's")
        return data

    with mock.patch.object(tiktoken.load, "read_file_cached", from_mirror_only):
        return tiktoken.Encoding(**tiktoken_ext.openai_public.gpt2())


@functools.lru_cache(maxsize=8)
def _tiktoken_cache_problem(cache: str, size: int, mtime: int) -> str | None:
    """What is wrong with the mirror's tiktoken cache, or None when the GPT-2 encoding loads from it."""
    try:
        gpt2_from_mirror(Path(cache))
    except DataError as err:
        return str(err)
    except Exception as err:  # a cache that passes the hash check but does not parse
        return f"cannot be read by tiktoken ({type(err).__name__}: {err})"
    return None


# -- tokenizers ---------------------------------------------------------------------------------------------------
