"""One's own text as a corpus, given only through parameters: three files or one file cut by fractions; every bad
input stops before compute with one line naming the key; WikiText-103 from the hub fails clearly when offline."""

import json
import os
import random
from pathlib import Path

import pytest
import yaml

from odebook.data import corpus as data
from odebook.book import runner
from odebook.data.own_corpus import split_text
from odebook.params import ParamError
from odebook import studies

from conftest import ROOT

STUDIES = {name: studies.schema(name) for name in studies.names()}


BOOK = runner.Book.at(ROOT)
SMOKE_01 = yaml.safe_load((BOOK.params / "smoke" / "01_gradient_flow.yaml").read_text())


def generated_text(n_lines: int, seed: int = 0) -> str:
    """A few KB of made-up sentences (a small vocabulary, so a byte model has something to learn)."""
    rng = random.Random(seed)
    words = "the cat dog sat ran on a mat log under over red blue quickly slowly".split()
    return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + " .\n" for _ in range(n_lines))


def params_01(**values):
    return STUDIES["01_gradient_flow"].from_mapping({**SMOKE_01, **values}, source="test.yaml")


def test_one_file_cut_by_fractions_is_tokenized_like_wikitext_and_described(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text(generated_text(400), encoding="utf-8")
    p = params_01(corpus="files", text_file=str(f), split_fractions=[0.8, 0.1, 0.1])
    corpus = data.load_corpus(p.corpus, **p.corpus_files())
    assert corpus.train + corpus.valid + corpus.test == f.read_text()  # disjoint, in order, nothing lost
    assert 0.75 < len(corpus.train) / len(f.read_text()) <= 0.8
    splits = data.tokenize(corpus, data.get_tokenizer("bytes"))
    assert len(splits.train) == len(corpus.train.encode()) and splits.vocab_size == 256
    assert str(f) in splits.description and "0.8 (train)" in splits.description and "bytes" in splits.description


def test_three_files_are_read_as_train_validation_test(tmp_path):
    paths = {}
    for i, key in enumerate(("train_file", "valid_file", "test_file")):
        paths[key] = tmp_path / f"{key}.txt"
        paths[key].write_text(generated_text(50, seed=i))
    corpus = data.load_corpus("files", **{k: str(v) for k, v in paths.items()})
    assert (corpus.train, corpus.valid, corpus.test) == tuple(v.read_text() for v in paths.values())
    assert all(str(v) in corpus.description for v in paths.values())


def test_split_text_cuts_only_at_line_breaks():
    text = "aaaa\nbb\ncc\ndddd\n"
    assert split_text(text, [0.5, 0.25, 0.25]) == ("aaaa\nbb\n", "cc\n", "dddd\n")


def _bad(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text(generated_text(40))
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "short.txt").write_text("one line only\n")
    return {
        "missing file": ({"text_file": str(tmp_path / "nope.txt")}, "key 'text_file'", "no such file"),
        "empty file": ({"text_file": str(tmp_path / "empty.txt")}, "key 'text_file'", "is empty"),
        "not UTF-8": ({"text_file": str(tmp_path / "latin1.txt")}, "key 'text_file'", "not UTF-8"),
        "relative path": ({"text_file": "good.txt"}, "key 'text_file'", "absolute path"),
        "fractions off 1": ({"text_file": str(good), "split_fractions": [0.5, 0.2, 0.2]}, "key 'split_fractions'",
                            "summing to 1"),
        "an empty split": ({"text_file": str(tmp_path / "short.txt")}, "key 'split_fractions'",
                           "leaves the train and validation part"),  # one line: all of it falls to test
        "a zero fraction": ({"text_file": str(good), "split_fractions": [0.9, 0.1, 0.0]}, "key 'split_fractions'",
                            "test part"),
        "one of three missing": ({"train_file": str(good), "valid_file": str(good)}, "key 'test_file'", "needs a path"),
        "bad validation file": ({"train_file": str(good), "valid_file": str(tmp_path / "empty.txt"),
                                 "test_file": str(good)}, "key 'valid_file'", "is empty"),
        "both ways": ({"text_file": str(good), "train_file": str(good)}, "key 'text_file'", "not both"),
        "no file at all": ({}, "key 'train_file'", "needs a path"),
    }


@pytest.mark.parametrize("case", ["missing file", "empty file", "not UTF-8", "relative path", "fractions off 1",
                                  "an empty split", "a zero fraction", "one of three missing", "bad validation file",
                                  "both ways", "no file at all"])
def test_bad_own_text_stops_before_compute_naming_the_key(tmp_path, case):
    values, key, says = _bad(tmp_path)[case]
    with pytest.raises(ParamError) as err:
        params_01(corpus="files", **values)
    message = str(err.value)
    assert "test.yaml" in message and key in message and says in message, message


def test_wikitext103_is_a_named_corpus_and_offline_it_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-cache"))  # not cached here
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert params_01(corpus="wikitext103").corpus == "wikitext103"  # accepted: the mirror is not asked for it
    with pytest.raises(data.DataError, match="WikiText-103 .*Salesforce/wikitext/wikitext-103-raw-v1.*corpus: files"):
        data.load_corpus("wikitext103")


@pytest.mark.slow
def test_study_01_smoke_runs_on_a_generated_corpus_given_only_through_parameters(tmp_path):
    text = tmp_path / "generated.txt"
    text.write_text(generated_text(600), encoding="utf-8")  # ~25 KB
    params = tmp_path / "params"
    (params / "smoke").mkdir(parents=True)
    (params / "smoke" / "01_gradient_flow.yaml").write_text(
        yaml.safe_dump({**SMOKE_01, "corpus": "files", "text_file": str(text), "split_fractions": [0.8, 0.1, 0.1]}))
    book = runner.Book(BOOK.notebooks, params, tmp_path / "outputs")
    (result,) = runner.run_book(book, "smoke", ["01_gradient_flow"])
    assert result.ok, result.error
    out = tmp_path / "outputs" / "smoke" / "01_gradient_flow"
    results = json.loads((out / "results.json").read_text())
    assert results["headline"]
    executed = (out / "01_gradient_flow.ipynb").read_text()
    assert f"Own text (one file {text}" in executed and "WikiText" not in executed.split("Own text")[1][:300]


@pytest.mark.parametrize("tokenizer", ["bytes", "gpt2"])
def test_a_split_shorter_than_a_window_is_refused_naming_the_split_and_the_file(tmp_path, monkeypatch, tokenizer):
    """A mirror whose validation file is one line passes the mirror's own checks; before, the run then failed with
    "split has 8 tokens, fewer than one window of 33", naming neither split nor file."""
    if "ODEBOOK_DATA" not in os.environ:
        pytest.skip("needs the data mirror's tiktoken files")
    shared = Path(os.environ["ODEBOOK_DATA"])
    mirror = tmp_path / "mirror"
    (mirror / "wikitext-2").mkdir(parents=True)
    for split in ("train", "test"):
        (mirror / "wikitext-2" / f"wiki.{split}.tokens").write_text(generated_text(400))
    (mirror / "wikitext-2" / "wiki.valid.tokens").write_text(" = Valkyria = \n")
    (mirror / "tiktoken").symlink_to(shared / "tiktoken")
    monkeypatch.setenv("ODEBOOK_DATA", str(mirror))
    with pytest.raises(ParamError) as err:
        params_01(tokenizer=tokenizer)
    message = str(err.value)
    assert "test.yaml" in message and "key 'seq_len' = 32: the validation split" in message
    assert str(mirror / "wikitext-2" / "wiki.valid.tokens") in message and "tokens; batches need more than one " \
        "window of 33" in message
    with pytest.raises(ParamError, match=r"the test split \(part of .*mine.txt\)"):
        (tmp_path / "mine.txt").write_text(generated_text(400) + "short\n")
        params_01(corpus="files", text_file=str(tmp_path / "mine.txt"), split_fractions=[0.5, 0.4999, 0.0001],
                  tokenizer=tokenizer)
