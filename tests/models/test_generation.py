"""KV-cached decoding against recomputation, for the baseline and the ODE hybrid with every fixed-grid solver."""

import pytest
import torch

from odebook.models import lm as models
from odebook.nn import KVCache

V, D, L, H, T = 61, 32, 4, 4, 40
SHAPE = dict(vocab_size=V, d_model=D, n_layer=L, n_head=H, max_seq_len=T)
CACHEABLE = {
    "baseline": lambda: models.gpt(**SHAPE),
    "hybrid-euler": lambda: models.ode_hybrid(**SHAPE, ode_layers=[1, 2], solver="euler", steps=3),
    "hybrid-midpoint": lambda: models.ode_hybrid(**SHAPE, ode_layers=[1, 2], solver="midpoint", steps=2),
    "hybrid-rk4-reversible": lambda: models.ode_hybrid(**SHAPE, ode_layers=[1, 2], solver="rk4", steps=2,
                                                       sensitivity="reversible"),
}
# fp32 on the CPU: cached attention reads the same keys and values in a different summation order
TOLERANCE = dict(atol=2e-5, rtol=1e-4)


def trained_like(name):
    """A model whose weights are far from initialisation, so every term of the computation matters."""
    torch.manual_seed(0)
    model = CACHEABLE[name]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("name", CACHEABLE)
def test_cached_logits_equal_the_logits_of_a_full_forward_pass(name):
    """Prefill 7 tokens, then feed the rest one at a time (and once 3 at a time) through the cache; every position's
    logits must equal those of one uncached forward pass over the whole sequence."""
    model = trained_like(name)
    idx = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(idx)
        cache = KVCache(T)
        pieces = [model.logits(model.hidden(idx[:, :7], cache=cache))]
        pieces.append(model.logits(model.hidden(idx[:, 7:10], cache=cache)))
        pieces += [model.logits(model.hidden(idx[:, t:t + 1], cache=cache)) for t in range(10, 20)]
    torch.testing.assert_close(torch.cat(pieces, 1), full, **TOLERANCE)
    assert cache.length == 20


@pytest.mark.parametrize("name", CACHEABLE)
def test_greedy_generation_gives_the_same_tokens_with_and_without_the_cache(name):
    model = trained_like(name)
    start = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(2))
    cached = models.generate(model, start, 30, temperature=0, cache=True)
    recomputed = models.generate(model, start, 30, temperature=0, cache=False)
    assert torch.equal(cached, recomputed)
    sampled = [models.generate(model, start, 30, temperature=0.8, top_k=5, cache=c,
                               generator=torch.Generator().manual_seed(3)) for c in (True, False)]
    assert torch.equal(*sampled)


def test_the_cache_is_refused_where_it_cannot_be_exact():
    adaptive = models.ode_hybrid(**SHAPE, ode_layers=[1, 2], solver="dopri5")
    start = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="adaptive 'dopri5'"):
        models.generate(adaptive, start, 2, temperature=0, cache=True)
    assert models.generate(adaptive, start, 2, temperature=0).shape == (1, 5)  # default: recompute
    gdn = models.pattern_lm("GS", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=4)
    with pytest.raises(ValueError, match="GatedDeltaNet, which has no KV cache"):
        models.generate(gdn, start, 2, temperature=0, cache=True)
    with pytest.raises(ValueError, match="exceed max_seq_len = 40"):
        models.generate(models.gpt(**SHAPE), start, T, temperature=0, cache=True)


def test_a_cache_pass_with_a_different_number_of_attention_calls_is_an_error():
    cache = KVCache(8)
    k = torch.zeros(1, 1, 2, 4)
    cache.begin(2)
    cache.update(k, k)
    cache.end()
    cache.begin(1)
    cache.update(k[:, :, :1], k[:, :, :1])
    with pytest.raises(RuntimeError, match="more attention calls"):
        cache.update(k[:, :, :1], k[:, :, :1])
