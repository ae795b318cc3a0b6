"""Study 04's vocabulary: the base tokenizer's cut, ids renumbered over the tokens used, every other token one
"unknown"; every retrieval prompt inside it, and the models built over it."""

import itertools

import torch

from odebook import studies
from odebook.data import corpus as data
from odebook.data import tasks

study = studies.load("04_mixed_training")
vocabulary = study.vocabulary


def test_ids_are_renumbered_over_the_used_tokens_and_every_other_token_is_one_unknown():
    base = data.get_tokenizer("bytes")
    tok = vocabulary.UsedTokens(base, base.encode("hello"))
    assert tok.vocab_size == 5 and tok.unknown == 4  # e, h, l, o and the unknown
    assert tok.encode("hello") == [1, 0, 2, 2, 3] and tok.decode(tok.encode("hello")) == "hello"
    assert tok.encode("hex") == [1, 0, 4] and tok.decode(tok.encode("oxo")) == f"o{vocabulary.UNKNOWN}o"


def test_gpt2_text_is_cut_as_gpt2_cuts_it():
    base = data.get_tokenizer("gpt2")
    text = "Once upon a time, Lily saw a red ball."
    tok = vocabulary.UsedTokens(base, base.encode(text))
    assert len(tok.encode(text)) == len(base.encode(text)) and tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == len(set(base.encode(text))) + 1


def test_every_retrieval_prompt_is_inside_the_task_vocabulary():
    for name in ("bytes", "gpt2"):
        base = data.get_tokenizer(name)
        tok = vocabulary.UsedTokens(base, vocabulary.task_tokens(base))
        sets = tasks.evaluation_sets(50, 123, ks=[1, 2, 4, 7], n_filler=6)
        prompts = [tasks.batch(exs, tok, every_question=True) for exs in sets.values()]
        training = itertools.islice(tasks.curriculum_batches(tok, 16, 7, [(10, 0), (20, 3)], [2, 4, 7]), 20)
        for x, y, *_ in [*prompts, *training]:
            answers = y[y != tasks.IGNORE_INDEX]
            assert not (x == tok.unknown).any() and not (answers == tok.unknown).any(), name


def test_the_models_are_built_over_the_studys_vocabulary():
    p = study.Params(pattern="GS", d_model=16, n_head=2, window=8, max_seq_len=96, chunk_size=8, max_train_stories=300)
    tok = p.vocabulary()
    assert tok.unknown > 1000 and tok.vocab_size < data.get_tokenizer("gpt2").vocab_size // 2
    for name, config in p.arms().items():
        model = config.build()
        assert model.tok_emb.num_embeddings == tok.vocab_size, name
        assert model(torch.tensor([tok.encode("Once upon a time")])).shape[-1] == tok.vocab_size
