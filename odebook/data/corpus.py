"""Corpora, tokenizers and batches.

Data come from the Hugging Face hub (``datasets``, ``tiktoken``) unless ``ODEBOOK_DATA`` points at a local mirror
laid out like ``../shared/data`` (``wikitext-2/``, ``tinystories/``, ``tiktoken/``). Every corpus says in
``description`` which files and splits it used, so a report can state it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from odebook.data.core import Corpus, DataError
from odebook.data.mirror import (DATA_ENV, HOW_TO_PROVIDE, MIRROR_FILES, TIKTOKEN_DIR, check_data, gpt2_from_mirror,
                                 mirror_dir)
from odebook.data.own_corpus import load_own_corpus
from odebook.nn.linear_ce import IGNORE_INDEX  # padding targets: the loss skips them

__all__ = ["DATA_ENV", "DataError", "Tokenizer", "ByteTokenizer", "TiktokenTokenizer", "get_tokenizer", "Corpus",
           "TokenSplits", "CORPORA", "check_data", "load_corpus", "tokenize", "unigram_loss", "random_batches",
           "fixed_batches",
           "Batch", "Documents", "mirror_stories", "load_tinystories", "document_batches", "fixed_document_batches",
           "IGNORE_INDEX"]

Batch = tuple[torch.Tensor, torch.Tensor]

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
        import tiktoken

        try:  # a mirror's cache is read alone, even where TIKTOKEN_CACHE_DIR names another
            self._enc = gpt2_from_mirror(root / TIKTOKEN_DIR) if root is not None else tiktoken.get_encoding("gpt2")
        except DataError:
            raise
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
WIKITEXT2_HUB = "wikitext-2-v1"  # the hub's tokenized variant: the same text as the mirror's wiki.*.tokens


def _wikitext2() -> Corpus:
    root = mirror_dir()
    if root is not None:
        check_data("wikitext2", "bytes")
        train, valid, test = ((root / f"wikitext-2/wiki.{k}.tokens").read_text(encoding="utf-8")
                              for k in ("train", "valid", "test"))
        return Corpus("wikitext2", train, valid, test,
                      f"WikiText-2, tokenized version (a local mirror, $ODEBOOK_DATA; the same text as the hub's "
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


WIKITEXT103_HUB = ("Salesforce/wikitext", "wikitext-103-raw-v1")  # hub only: the mirror does not hold it


def _wikitext103() -> Corpus:
    try:
        import datasets

        ds = datasets.load_dataset(*WIKITEXT103_HUB)
    except Exception as err:  # offline and not cached, hub errors: datasets raises many types
        raise DataError(f"WikiText-103 ({'/'.join(WIKITEXT103_HUB)}) could not be loaded from the hub "
                        f"({type(err).__name__}: {err}). It is not in the local mirror: connect to the internet "
                        "once (datasets caches it), or use corpus: files with your own copy") from err
    splits = {k: "".join(ds[k]["text"]) for k in ("train", "validation", "test")}
    return Corpus("wikitext103", splits["train"], splits["validation"], splits["test"],
                  f"WikiText-103, raw version ({'/'.join(WIKITEXT103_HUB)} from the Hugging Face hub): trained on the "
                  "official train split, selected on validation, scored once on test")


_CORPORA = {"wikitext2": _wikitext2, "wikitext103": _wikitext103, "files": load_own_corpus}
CORPORA = tuple(_CORPORA)


def load_corpus(name: str, **files: object) -> Corpus:
    """A named corpus; ``files`` (train_file, valid_file, test_file, text_file, split_fractions) only for ``files``,
    one's own text (``odebook.data.own_corpus``)."""
    if name not in _CORPORA:
        raise ValueError(f"unknown corpus {name!r}; allowed: {', '.join(_CORPORA)}")
    return _CORPORA[name](**files) if name == "files" else _CORPORA[name]()


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


def unigram_loss(train: torch.Tensor, batches: Sequence[Batch], vocab_size: int) -> float:
    """The loss a model that learned nothing but token frequencies reaches on ``batches`` (next-token targets, as
    ``evaluate`` scores them: the mean over batches of each batch's mean loss): −log p(y) under the ``train`` split's
    unigram counts, add-one smoothed over ``vocab_size`` symbols; padding targets (``IGNORE_INDEX``) are skipped. A
    language model that learned lies below it."""
    log_p = torch.log((torch.bincount(train, minlength=vocab_size).double() + 1) / (len(train) + vocab_size))
    return float(torch.stack([-log_p[y[y != IGNORE_INDEX]].mean() for _, y in batches]).mean())


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


def mirror_stories(root: Path) -> tuple[list[str], list[str]]:
    """The mirror's TinyStories as documents: the whole training stories (the file's last one is cut off and left
    out) and the validation text's blank-line-separated blocks."""
    train_text = (root / MIRROR_FILES["tinystories"][0]).read_text(encoding="utf-8")
    stories = [t.strip() for t in train_text.split("<|endoftext|>")]
    valid_text = (root / MIRROR_FILES["tinystories"][1]).read_text(encoding="utf-8")
    return [t for t in stories[:-1] if t], [b.strip() for b in valid_text.split("\n\n") if b.strip()]


def load_tinystories(max_train: int = 50_000) -> Documents:
    """TinyStories: the mirror's first 2 MiB of the training stories and its validation text, or the hub's
    ``roneneldan/TinyStories`` (the first ``max_train`` training stories)."""
    root = mirror_dir()
    if root is not None:
        check_data("tinystories", "bytes")
        train, valid = mirror_stories(root)
        train = train[:max_train]
        return Documents(train, valid, f"TinyStories (a local mirror, $ODEBOOK_DATA): {len(train):,} whole training "
                         "stories; "
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
