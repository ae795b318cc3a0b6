"""Study 03's no-state control: the GDN layer with its state emptied before every write. Its read-out is the gated
delta rule's (the reference loop) with the decay at zero, it keeps the GDN stack's weights, and it is causal."""

import pytest
import torch

from odebook import studies
from odebook.models.lm import pattern_lm
from odebook.nn.delta_rule import gated_delta_rule_reference
from tests.causality import assert_causal
from tests.families import SHAPE, V, no_state_gdn

no_state = studies.load("03_gdn_scaling").no_state


def test_the_forgetful_read_is_the_delta_rule_with_its_state_forgotten_before_each_write():
    gen = torch.Generator().manual_seed(0)
    B, T, H, K = 2, 13, 3, 8
    q, k = (torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1) for _ in range(2))
    v, beta = torch.randn(B, T, H, K, generator=gen), torch.rand(B, T, H, generator=gen)
    forgotten = torch.full((B, T, H), -1e4)  # exp(g) = 0 in fp32: the state is emptied before each write
    reference, _ = gated_delta_rule_reference(q, k, v, forgotten, beta)
    torch.testing.assert_close(no_state.forgetful_read(q, k, v, beta), reference, atol=1e-6, rtol=1e-5)


def test_the_no_state_stack_starts_from_the_gdn_stacks_weights_and_answers_differently():
    torch.manual_seed(0)
    control = no_state_gdn()
    torch.manual_seed(0)
    gdn = pattern_lm("GG", **SHAPE, window=8, chunk_size=8)
    for (name, a), b in zip(control.state_dict().items(), gdn.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    x = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (control(x) - gdn(x)).abs().max() > 1e-4


def test_the_no_state_stack_sees_only_its_convolutions_reach():
    """Two layers of width-4 convolutions reach 6 tokens back; a token 7 back changes nothing."""
    model = no_state_gdn().eval()
    x = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(2))
    x2 = x.clone()
    x2[:, 5] = (x[:, 5] + 1) % V
    with torch.no_grad():
        a, b = model(x), model(x2)
    assert (a[:, 11] - b[:, 11]).abs().max() > 1e-5  # 6 back: seen
    torch.testing.assert_close(a[:, 12:], b[:, 12:], atol=1e-6, rtol=0)  # 7 or more back: not seen


def test_the_no_state_stack_is_causal():
    assert_causal(no_state_gdn(), SHAPE["vocab_size"], 20, positions=[3, 11, 19])


def test_the_mqar_arms_pair_each_gdn_stack_with_its_no_state_control_at_one_width():
    import dataclasses

    p = studies.load("03_gdn_scaling").Params.from_mapping({"mqar_width": 32, "mqar_heads": [4, 1]}, "test")
    arms = p.mqar_arms()
    assert list(arms) == ["gdn h4", "gdn h1", "attention", "no state h4", "no state h1"]
    for h in (4, 1):
        gdn, control = arms[f"gdn h{h}"], arms[f"no state h{h}"]
        assert isinstance(control, no_state.NoStateConfig) and not isinstance(gdn, no_state.NoStateConfig)
        assert dataclasses.asdict(control) == dataclasses.asdict(gdn)  # the same stack, but for its state
        assert (gdn.d_model, gdn.n_head, gdn.pattern) == (32, h, "GG")
    assert arms["attention"].pattern == "CC" and arms["attention"].n_head == p.n_head
    with pytest.raises(Exception, match="mqar_heads"):
        studies.load("03_gdn_scaling").Params.from_mapping({"mqar_width": 32, "mqar_heads": [1, 4]}, "test")
