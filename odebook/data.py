"""Corpora, tokenizers and batches.

Data come from the Hugging Face hub (``datasets``, ``tiktoken``) unless ``ODEBOOK_DATA`` points at a local mirror
laid out like ``../shared/data`` (``wikitext-2/``, ``tinystories/``, ``tiktoken/``). Every corpus says in
``description`` which files and splits it used, so a report can state it.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from unittest import mock

import torch

from odebook.nn.linear_ce import IGNORE_INDEX  # padding targets: the loss skips them

__all__ = ["DATA_ENV", "DataError", "Tokenizer", "ByteTokenizer", "TiktokenTokenizer", "get_tokenizer", "Corpus",
           "TokenSplits", "check_data", "load_corpus", "tokenize", "random_batches", "fixed_batches", "Batch",
           "Documents", "load_tinystories", "document_batches", "fixed_document_batches", "IGNORE_INDEX"]

DATA_ENV = "ODEBOOK_DATA"
Batch = tuple[torch.Tensor, torch.Tensor]

# Files each corpus needs in a local mirror, relative to $ODEBOOK_DATA.
MIRROR_FILES = {
    "wikitext2": ("wikitext-2/wiki.train.tokens", "wikitext-2/wiki.valid.tokens", "wikitext-2/wiki.test.tokens"),
    "tinystories": ("tinystories/train-first-2MiB.txt", "tinystories/valid-blankline-separated.txt"),
}
TIKTOKEN_DIR = "tiktoken"

HOW_TO_PROVIDE = (f"Either connect to the internet (data come from the Hugging Face hub), or set {DATA_ENV} to a "
                  "local mirror laid out like ../shared/data (see its README), e.g. "
                  f"{DATA_ENV}=../shared/data make run-all")


class DataError(RuntimeError):
    """Data could not be found or loaded; the message says how to provide them."""


def mirror_dir() -> Path | None:
    """The local mirror named by ``$ODEBOOK_DATA``, or None when it is unset."""
    value = os.environ.get(DATA_ENV)
    return Path(value).expanduser().resolve() if value else None


def check_data(corpus: str, tokenizer: str) -> None:
    """Raise DataError when a local mirror is configured but lacks a file this corpus or tokenizer needs."""
    root = mirror_dir()
    if root is None:
        return
    if not root.is_dir():
        raise DataError(f"{DATA_ENV}={root} is not a directory. {HOW_TO_PROVIDE}")
    needed = list(MIRROR_FILES[corpus]) + ([TIKTOKEN_DIR] if tokenizer == "gpt2" else [])
    missing = [name for name in needed if not (root / name).exists()]
    if missing:
        raise DataError(f"{DATA_ENV}={root} has no {', '.join(missing)}. {HOW_TO_PROVIDE}")
    for name in MIRROR_FILES[corpus]:
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


@functools.lru_cache(maxsize=8)
def _tiktoken_cache_problem(cache: str, size: int, mtime: int) -> str | None:
    """Load the GPT-2 encoding from the mirror's tiktoken cache alone: a missing file or one whose sha256 is not
    the one tiktoken expects is reported, never downloaded or deleted (tiktoken itself would do both)."""
    import tiktoken.load
    import tiktoken_ext.openai_public

    def from_mirror_only(blobpath: str, expected_hash: str | None = None) -> bytes:
        name = hashlib.sha1(blobpath.encode()).hexdigest()
        try:
            data = (Path(cache) / name).read_bytes()
        except OSError:
            raise DataError(f"has no {name} (tiktoken's cache of {blobpath})") from None
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise DataError(f"{name} (tiktoken's cache of {blobpath}) is damaged: its sha256 is not tiktoken's")
        return data

    try:
        with mock.patch.object(tiktoken.load, "read_file_cached", from_mirror_only):
            tiktoken_ext.openai_public.gpt2()
    except DataError as err:
        return str(err)
    except Exception as err:  # a cache that passes the hash check but does not parse
        return f"cannot be read by tiktoken ({type(err).__name__}: {err})"
    return None


# -- tokenizers ---------------------------------------------------------------------------------------------------
class Tokenizer(Protocol):
    name: str
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes: 256 symbols, lossless."""

    name = "bytes"
    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


class TiktokenTokenizer:
    """GPT-2 BPE through tiktoken (50,257 symbols)."""

    name = "gpt2"

    def __init__(self) -> None:
        root = mirror_dir()
        if root is not None:
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(root / TIKTOKEN_DIR))
        import tiktoken

        try:
            self._enc = tiktoken.get_encoding("gpt2")
        except Exception as err:  # network or cache failure: tiktoken raises several types
            raise DataError(f"the GPT-2 tokenizer could not be loaded ({type(err).__name__}: {err}). "
                            f"{HOW_TO_PROVIDE}") from err
        self.vocab_size = self._enc.n_vocab

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)


def get_tokenizer(name: str) -> Tokenizer:
    if name == "bytes":
        return ByteTokenizer()
    if name == "gpt2":
        return TiktokenTokenizer()
    raise ValueError(f"unknown tokenizer {name!r}; allowed: 'bytes', 'gpt2'")


# -- corpora ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Corpus:
    """Three disjoint text splits and a sentence saying where they came from."""

    name: str
    train: str
    valid: str
    test: str
    description: str


WIKITEXT2_HUB = "wikitext-2-v1"  # the hub's tokenized variant: the same text as the mirror's wiki.*.tokens


def _wikitext2() -> Corpus:
    root = mirror_dir()
    if root is not None:
        check_data("wikitext2", "bytes")
        train, valid, test = ((root / f"wikitext-2/wiki.{k}.tokens").read_text(encoding="utf-8")
                              for k in ("train", "valid", "test"))
        return Corpus("wikitext2", train, valid, test,
                      f"WikiText-2, tokenized version (local mirror {root}; the same text as the hub's "
                      f"{WIKITEXT2_HUB}): trained on the official train split, selected on validation, scored once "
                      "on test")
    try:
        import datasets

        ds = datasets.load_dataset("wikitext", WIKITEXT2_HUB)
    except Exception as err:  # offline, hub errors: datasets raises many types
        raise DataError(f"WikiText-2 could not be loaded from the hub ({type(err).__name__}: {err}). "
                        f"{HOW_TO_PROVIDE}") from err
    splits = {k: "".join(ds[k]["text"]) for k in ("train", "validation", "test")}
    return Corpus("wikitext2", splits["train"], splits["validation"], splits["test"],
                  f"WikiText-2, tokenized version ({WIKITEXT2_HUB} from the Hugging Face hub): trained on the official "
                  "train split, selected on validation, scored once on test")


_CORPORA = {"wikitext2": _wikitext2}


def load_corpus(name: str) -> Corpus:
    if name not in _CORPORA:
        raise ValueError(f"unknown corpus {name!r}; allowed: {', '.join(_CORPORA)}")
    return _CORPORA[name]()


@dataclass(frozen=True)
class TokenSplits:
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    vocab_size: int
    description: str


def tokenize(corpus: Corpus, tokenizer: Tokenizer) -> TokenSplits:
    """Encode each split to a 1-D int64 tensor."""

    def enc(text: str) -> torch.Tensor:
        return torch.tensor(tokenizer.encode(text), dtype=torch.long)

    train, valid, test = enc(corpus.train), enc(corpus.valid), enc(corpus.test)
    desc = (f"{corpus.description}. Tokenizer: {tokenizer.name} ({tokenizer.vocab_size} symbols); "
            f"{len(train):,} / {len(valid):,} / {len(test):,} train / validation / test tokens")
    return TokenSplits(train, valid, test, tokenizer.vocab_size, desc)


# -- batches ------------------------------------------------------------------------------------------------------
def _windows(tokens: torch.Tensor, starts: torch.Tensor, seq_len: int) -> Batch:
    idx = starts[:, None] + torch.arange(seq_len + 1)  # [B, T+1]
    w = tokens[idx]
    return w[:, :-1], w[:, 1:]


def random_batches(tokens: torch.Tensor, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
    """Endless batches of random windows (inputs, next-token targets), reproducible from ``seed``."""
    if len(tokens) <= seq_len + 1:
        raise DataError(f"split has {len(tokens)} tokens, fewer than one window of {seq_len + 1}")
    gen = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(tokens) - seq_len - 1, (batch_size,), generator=gen)
        yield _windows(tokens, starts, seq_len)


def fixed_batches(tokens: torch.Tensor, n_batches: int, batch_size: int, seq_len: int) -> list[Batch]:
    """``n_batches`` batches of windows spread evenly over the split: the same for every model and seed."""
    n = n_batches * batch_size
    if len(tokens) <= seq_len + 1:
        raise DataError(f"split has {len(tokens)} tokens, fewer than one window of {seq_len + 1}")
    starts = torch.linspace(0, len(tokens) - seq_len - 1, n).long()
    return [_windows(tokens, s, seq_len) for s in starts.split(batch_size)]


# -- documents ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Documents:
    """Separate documents (stories) for training and held-out evaluation."""

    train: list[str]
    valid: list[str]
    description: str


def load_tinystories(max_train: int = 50_000) -> Documents:
    """TinyStories: the mirror's first 2 MiB of the training stories and its validation text, or the hub's
    ``roneneldan/TinyStories`` (the first ``max_train`` training stories)."""
    root = mirror_dir()
    if root is not None:
        check_data("tinystories", "bytes")
        train_text = (root / "tinystories/train-first-2MiB.txt").read_text(encoding="utf-8")
        stories = [t.strip() for t in train_text.split("<|endoftext|>")]
        train = [t for t in stories[:-1] if t][:max_train]  # the file's last story is cut off: left out
        valid_text = (root / "tinystories/valid-blankline-separated.txt").read_text(encoding="utf-8")
        valid = [b.strip() for b in valid_text.split("\n\n") if b.strip()]
        return Documents(train, valid, f"TinyStories (local mirror {root}): {len(train):,} whole training stories; "
                         f"held-out: the validation stories as {len(valid):,} blank-line-separated blocks (in this "
                         "file story boundaries and paragraph breaks look alike, so some blocks are paragraphs)")
    try:
        import datasets

        ds = datasets.load_dataset("roneneldan/TinyStories")
    except Exception as err:  # offline, hub errors: datasets raises many types
        raise DataError(f"TinyStories could not be loaded from the hub ({type(err).__name__}: {err}). "
                        f"{HOW_TO_PROVIDE}") from err
    train, valid = list(ds["train"][:max_train]["text"]), list(ds["validation"]["text"])
    return Documents(train, valid, f"TinyStories (roneneldan/TinyStories, Hugging Face hub): the first "
                     f"{len(train):,} training stories; held-out: the {len(valid):,} validation stories")


def _pad_documents(docs: list[torch.Tensor], seq_len: int) -> Batch:
    """One document per row, cut to seq_len + 1 tokens; padding is IGNORE_INDEX in the targets."""
    x = torch.zeros(len(docs), seq_len, dtype=torch.long)
    y = torch.full((len(docs), seq_len), IGNORE_INDEX, dtype=torch.long)
    for i, d in enumerate(docs):
        d = d[: seq_len + 1]
        x[i, : len(d) - 1], y[i, : len(d) - 1] = d[:-1], d[1:]
    return x, y


def document_batches(docs: list[torch.Tensor], batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
    """Endless batches of randomly drawn documents (each at least two tokens), reproducible from ``seed``."""
    docs = [d for d in docs if len(d) >= 2]
    gen = torch.Generator().manual_seed(seed)
    while True:
        yield _pad_documents([docs[i] for i in torch.randint(0, len(docs), (batch_size,), generator=gen)], seq_len)


def fixed_document_batches(docs: list[torch.Tensor], n_batches: int, batch_size: int, seq_len: int) -> list[Batch]:
    """The first ``n_batches × batch_size`` documents (of at least two tokens), in order: the same for every run."""
    docs = [d for d in docs if len(d) >= 2][: n_batches * batch_size]
    return [_pad_documents(docs[i:i + batch_size], seq_len) for i in range(0, len(docs), batch_size)]
