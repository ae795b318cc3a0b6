"""Study 01's arms from one configuration: parameter counts, compute, groups by position, causality."""

import pytest
import torch

from odebook.models.arms import HybridConfig
from odebook import studies
from odebook.study.flops import forward_flops
from odebook.models.lm import count_params
from odebook.nn import Block

from causality import assert_causal

arms01 = studies.load("01_gradient_flow").arms
GradientFlowParams = studies.schema("01_gradient_flow")


V, D, H, L, P = 40, 32, 4, 6, 16
CFG = HybridConfig(vocab_size=V, d_model=D, n_layer=L, n_head=H, max_seq_len=P, ode_layers=(2, 3), solver="euler",
                   steps=4, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=4, alpha_init=0.1)
BLOCK = sum(q.numel() for q in Block(d_model=D, n_head=H).parameters())
FIELD_EXTRA = (D + D) + (D * D + D) + (4 * D + D) + 1  # time embedding 1 → d → d, control embedding, α


def build(arm):
    torch.manual_seed(0)
    return arms01.gradient_flow_arms(CFG)[arm]()


def test_parameter_counts_of_the_arms():
    base = count_params(build("baseline"))
    assert count_params(build("null")) == base - 2 * BLOCK
    assert count_params(build("shared")) == base - BLOCK  # one block, applied 4 times
    assert count_params(build("hybrid")) == base - 2 * BLOCK + BLOCK + FIELD_EXTRA


def test_compute_of_the_arms_matches_the_field_evaluations():
    x = torch.randint(0, V, (2, P))
    flops = {arm: forward_flops(build(arm), x) for arm in arms01.ARMS}
    per_block = (flops["baseline"] - flops["null"]) // 2
    assert flops["shared"] == flops["baseline"] + (4 - 2) * per_block  # four applications where there were two
    # the same four evaluations, plus each evaluation's time embedding (1 → d → d) and control embedding (B × 4 → d)
    assert flops["hybrid"] == flops["shared"] + 4 * 2 * (D + D * D + 2 * 4 * D)


@pytest.mark.parametrize("arm", arms01.ARMS)
def test_every_arm_is_causal_and_its_groups_partition_its_parameters(arm):
    model = build(arm)
    assert_causal(model, V, P, positions=[0, 7, P - 1])
    groups = arms01.layer_groups(model, CFG.replaced_blocks(arm))
    ids = [id(q) for qs in groups.values() for q in qs]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    assert ("replaced" in groups) == (arm != "null")
    if arm != "null":
        span = sum(q.numel() for q in groups["replaced"])
        assert span == {"baseline": 2 * BLOCK, "shared": BLOCK, "hybrid": BLOCK + FIELD_EXTRA}[arm]
    assert sum(q.numel() for q in groups["before"]) == 2 * BLOCK


def test_params_give_the_configuration_the_notebook_builds():
    p = GradientFlowParams.from_mapping({"tokenizer": "bytes", "d_model": 32, "ode_steps": 3, "solver": "rk4"}, "x")
    cfg = p.model_config(256)
    assert (cfg.vocab_size, cfg.d_model, cfg.solver, cfg.steps, cfg.ode_layers) == (256, 32, "rk4", 3, (1,))
    model = cfg.shared()
    assert model.blocks[1].times == 12  # rk4: 4 evaluations per step × 3 steps
    with pytest.raises(ValueError, match="fixed-grid"):
        cfg.replace(solver="dopri5").shared()


def test_the_configuration_holds_no_default_of_its_own_and_refuses_what_the_block_would():
    """Each default lives once, in the parameter schema: the configuration has none. A configuration that names a
    solver its sensitivity rules out, or layers the stack does not have, is refused when it is made (also by
    replace), with the rule's own message."""
    import dataclasses

    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(HybridConfig))
    with pytest.raises(ValueError, match="adaptive"):
        CFG.replace(solver="dopri5", sensitivity="reversible")
    with pytest.raises(ValueError, match="consecutive"):
        CFG.replace(ode_layers=(1, 3))
