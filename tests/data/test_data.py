import math

import pytest
import torch

from odebook.data import corpus as data


def test_byte_tokenizer_round_trip():
    tok = data.ByteTokenizer()
    text = "naïve = café ∂t"
    ids = tok.encode(text)
    assert max(ids) < tok.vocab_size == 256
    assert tok.decode(ids) == text


def test_gpt2_tokenizer_from_the_mirror():
    tok = data.get_tokenizer("gpt2")
    assert tok.vocab_size == 50257
    assert tok.encode("Hello world") == [15496, 995]  # GPT-2's ids
    assert tok.decode(tok.encode(" the ODE block")) == " the ODE block"


def test_wikitext2_mirror_splits_are_disjoint_and_described():
    corpus = data.load_corpus("wikitext2")
    assert len(corpus.train) > 10_000_000 and len(corpus.valid) > 1_000_000 and len(corpus.test) > 1_000_000
    # the official train, validation and test splits of the tokenized version (2,088,628 tokens counting <eos>)
    assert sum(len(line.split()) + 1 for line in corpus.train.splitlines()) == 2_088_628
    assert corpus.valid[-2000:] not in corpus.test and corpus.test[:2000] not in corpus.valid
    assert corpus.train[:2000] not in corpus.valid + corpus.test
    assert corpus.valid[:2000] not in corpus.train and corpus.test[:2000] not in corpus.train
    assert "trained on the official train split" in corpus.description and "wikitext-2-v1" in corpus.description


def test_tokenize_reports_counts():
    splits = data.tokenize(data.load_corpus("wikitext2"), data.ByteTokenizer())
    assert splits.vocab_size == 256 and splits.train.dtype == torch.long
    assert f"{len(splits.train):,}" in splits.description and "bytes" in splits.description


def test_missing_mirror_files_give_a_message_that_says_how(monkeypatch, tmp_path):
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path))
    says = "has no wikitext-2/wiki.train.tokens.*wiki.valid.tokens.*tiktoken.*set ODEBOOK_DATA"
    with pytest.raises(data.DataError, match=says):
        data.check_data("wikitext2", "gpt2")
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(data.DataError, match="is not a directory"):
        data.load_corpus("wikitext2")


def test_no_hub_and_no_mirror_says_how_to_provide_data(monkeypatch):
    monkeypatch.delenv("ODEBOOK_DATA", raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(data.DataError, match="could not be loaded from the hub.*set ODEBOOK_DATA"):
        data.load_corpus("wikitext2")


def test_random_batches_are_reproducible_next_token_pairs():
    tokens = torch.arange(1000)
    a = next(data.random_batches(tokens, 4, 16, seed=3))
    b = next(data.random_batches(tokens, 4, 16, seed=3))
    c = next(data.random_batches(tokens, 4, 16, seed=4))
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    x, y = a
    assert x.shape == y.shape == (4, 16) and torch.equal(y, x + 1)


def test_fixed_batches_cover_the_split_evenly():
    tokens = torch.arange(1000)
    batches = data.fixed_batches(tokens, 3, 2, 10)
    assert len(batches) == 3 and all(x.shape == (2, 10) for x, _ in batches)
    starts = torch.cat([x[:, 0] for x, _ in batches])
    assert starts[0] == 0 and starts[-1] == 1000 - 11
    assert torch.equal(starts, torch.cat([x[:, 0] for x, _ in data.fixed_batches(tokens, 3, 2, 10)]))


def test_tinystories_mirror_documents():
    docs = data.load_tinystories()
    assert len(docs.train) == 2316 and len(docs.valid) > 1000  # the cut-off last story is left out
    assert all("<|endoftext|>" not in d for d in docs.train[:50])
    assert "blank-line-separated" in docs.description


def test_document_batches_pad_with_the_ignore_index():
    docs = [torch.arange(1, 6), torch.arange(10, 40), torch.tensor([7])]  # the one-token document is unusable
    (x, y), = data.fixed_document_batches(docs, 1, 3, 8)
    assert x.shape == (2, 8)
    assert x[0, :4].tolist() == [1, 2, 3, 4] and y[0, :4].tolist() == [2, 3, 4, 5]
    assert (y[0, 4:] == data.IGNORE_INDEX).all() and (x[0, 4:] == 0).all()
    assert y[1].tolist() == list(range(11, 19))  # a long document is cut to seq_len + 1 tokens
    a, b = next(data.document_batches(docs, 4, 8, seed=0)), next(data.document_batches(docs, 4, 8, seed=0))
    assert torch.equal(a[0], b[0])


def test_the_gpt2_tokenizer_reads_the_mirror_even_when_tiktoken_is_pointed_elsewhere(monkeypatch, tmp_path):
    """A machine whose TIKTOKEN_CACHE_DIR names another (here empty) folder, offline: the mirror's cache is used."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("tiktoken.registry.ENCODINGS", {})  # no encoding loaded by an earlier test
    monkeypatch.setattr("tiktoken.load.read_file", lambda blobpath: pytest.fail(f"tiktoken went online for {blobpath}"))
    tok = data.TiktokenTokenizer()
    assert tok.vocab_size == 50257 and tok.decode(tok.encode(" Hello world")) == " Hello world"


def test_the_unigram_loss_is_the_cross_entropy_of_the_train_splits_smoothed_frequencies():
    torch.manual_seed(0)
    train, test, V = torch.randint(0, 6, (500,)), torch.randint(0, 8, (300,)), 8  # symbols 6, 7 never in train
    batches = data.fixed_batches(test, 3, 4, 10)
    counts = torch.bincount(train, minlength=V).double() + 1
    logits = torch.log(counts / counts.sum())  # the reference: every position predicts the same distribution
    reference = sum(torch.nn.functional.cross_entropy(logits.expand(y.numel(), V), y.flatten()).item()
                    for _, y in batches) / len(batches)
    assert data.unigram_loss(train, batches, V) == pytest.approx(reference, rel=1e-12)
    uniform = torch.arange(V).repeat(50)  # every symbol equally often: log V
    assert data.unigram_loss(uniform, batches, V) == pytest.approx(math.log(8), rel=1e-12)
    padded = [(x, torch.where(torch.arange(y.shape[1]) < 5, y, data.IGNORE_INDEX)) for x, y in batches]
    assert data.unigram_loss(train, padded, V) == pytest.approx(
        data.unigram_loss(train, [(x[:, :5], y[:, :5]) for x, y in batches], V), rel=1e-12)
