"""One shape of model configuration: a frozen dataclass per model family, made from a study's parameters, with no
default of its own (the schema holds each default once); study 04's arms as a typed mapping the notebook asks
instead of parsing names."""

import dataclasses

import pytest

from odebook.models.arms import HybridConfig
from odebook.models.configs import PatternConfig
from odebook.models.lm import count_params, pattern_lm
from odebook.models.local_paths import LOCAL_PATHS, LocalPath
from odebook import studies

GDNScalingParams = studies.schema("03_gdn_scaling")
GradientFlowParams = studies.schema("01_gradient_flow")
MixedTrainingParams = studies.schema("04_mixed_training")
ODESolverParams = studies.schema("05_ode_solvers")
TimeIndexedParams = studies.schema("02_time_indexed")


SMALL = {"tokenizer": "bytes", "steps": 4, "eval_interval": 2}
RETRIEVAL = {**SMALL, "ks": [2], "curriculum": [0, 2], "max_seq_len": 512, "seq_len": 16}


def configs():
    return {
        "01": GradientFlowParams.from_mapping(SMALL, "x").model_config(256),
        "05": ODESolverParams.from_mapping(SMALL, "x").model_config(256),
        "02": TimeIndexedParams.from_mapping(SMALL, "x").model_config(256),
        "03": GDNScalingParams.from_mapping(RETRIEVAL, "x").size_config(0, "hybrid"),
        "04": MixedTrainingParams.from_mapping(RETRIEVAL, "x").arms()["drop_0.7"],
    }


@pytest.mark.parametrize("study", ["01", "05", "02", "03", "04"])
def test_every_study_s_model_configuration_is_a_frozen_dataclass_without_defaults(study):
    cfg = configs()[study]
    assert dataclasses.is_dataclass(cfg) and isinstance(cfg, (HybridConfig, studies.load("02_time_indexed").arms.Config,
                                                                   PatternConfig))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 8
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(cfg))


def test_the_configurations_build_what_the_builders_build_from_the_same_settings():
    p = GDNScalingParams.from_mapping(RETRIEVAL, "x")
    ladder = p.size_config(1, "gdn")
    assert (ladder.pattern, ladder.d_model, ladder.state_read) == ("GG", p.ladder_d[1], False)
    model = ladder.build()
    assert count_params(model) == count_params(pattern_lm("GG", vocab_size=256, d_model=p.ladder_d[1],
                                                          n_head=p.n_head, max_seq_len=p.max_seq_len,
                                                          window=p.window, chunk_size=p.chunk_size))


def test_study_04_s_arms_are_typed_so_no_notebook_parses_a_name():
    p = MixedTrainingParams.from_mapping({**RETRIEVAL, "bottlenecks": list(LOCAL_PATHS)}, "x")
    arms = p.arms()
    assert list(arms) == [*LOCAL_PATHS, "drop_0.7+out_0.7", "control", "attention"]
    assert all(isinstance(c.local_path, LocalPath) for c in arms.values())
    assert [a for a, c in arms.items() if c.state_read] == [*LOCAL_PATHS, "drop_0.7+out_0.7"]
    # the dropped-output arm is the source's drop arm but for its GDN output dropped
    out = arms["drop_0.7+out_0.7"]
    assert out.output_drop == 0.7 and arms["drop_0.7"] == PatternConfig(
        **{f.name: getattr(out, f.name) for f in dataclasses.fields(PatternConfig)})
    # every G a W (sliding window behind the same short convolution: the two differ in memory only); S stays S; the
    # comparator's every G a C (full attention behind that convolution)
    assert arms["control"].pattern == p.pattern.replace("G", "W") and not arms["control"].state_read
    assert set(arms["control"].pattern) == {"W", "S"}
    assert arms["attention"].pattern == p.pattern.replace("G", "C") and not arms["attention"].state_read
    static = [a for a, c in arms.items() if c.state_read and c.local_path.static]
    assert static == ["static_0.3", "static_0.1"]  # "none" is no bottleneck
    assert [a for a, c in arms.items() if c.local_path.source_drop] == ["drop_0.7", "drop_0.7+out_0.7"]  # 0.7, then 0.3
    assert (LOCAL_PATHS["drop_0.7"].scale, LOCAL_PATHS["drop_0.7"].drop_prob) == (0.3, 0.7)
    assert LOCAL_PATHS["drop_0.7_inverted"].inverted and not LOCAL_PATHS["drop_0.7_inverted"].as_source
    fewer = MixedTrainingParams.from_mapping({**RETRIEVAL, "control": False, "comparator": False, "output_drop": 0},
                                             "x").arms()
    assert list(fewer) == ["static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted"]


def test_the_schema_offers_exactly_the_typed_arms():
    choices = dataclasses.fields(MixedTrainingParams)
    bottlenecks = next(f for f in choices if f.name == "bottlenecks")
    assert bottlenecks.metadata["choices"] == tuple(LOCAL_PATHS)
