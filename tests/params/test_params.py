import dataclasses

import pytest

from odebook.params import ParamError, load_yaml
from odebook import studies
from odebook.studies import validate_file

GradientFlowParams = studies.schema("01_gradient_flow")
STUDIES = {name: studies.schema(name) for name in studies.names()}


def check(values, source="params/cpu/01_gradient_flow.yaml"):
    return GradientFlowParams.from_mapping(values, source=source)


def error_of(values) -> str:
    with pytest.raises(ParamError) as info:
        check(values)
    return str(info.value)


def test_defaults_are_valid():
    p = check({})
    assert p.ode_layers == [1] and p.n_layer == 2 and p.solver == "euler" and p.steps == 500


@pytest.mark.parametrize("values, key, allowed", [
    ({"n_layers": 6}, "n_layers", "did you mean 'n_layer'"),                 # unknown key
    ({"steps": "many"}, "steps", "must be an integer"),                      # wrong type
    ({"steps": True}, "steps", "must be an integer"),                        # bool is not an int
    ({"steps": 0}, "steps", "must be >= 1"),                                 # zero steps
    ({"lr": -1.0}, "lr", "must be > 0.0"),                                   # out of range
    ({"solver": "rk45"}, "solver", "must be one of 'euler', 'midpoint', 'rk4', 'dopri5'"),
    ({"ode_layers": [5, 6]}, "ode_layers", "layers must lie in 0..1"),       # outside the model
    ({"ode_layers": [1, 3]}, "ode_layers", "consecutive"),
    ({"seq_len": 128}, "seq_len", "must be <= max_seq_len = 64"),
    ({"n_head": 3}, "n_head", "must divide d_model"),
    ({"tokenizer": "sentencepiece"}, "tokenizer", "'gpt2', 'bytes'"),
    ({"ode_layers": 2}, "ode_layers", "must be a list of an integer"),
    ({"lm_seeds": 13}, "lm_seeds", "must be <= n_seeds = 12"),              # would reach the tuning seed
])
def test_each_problem_names_file_key_and_what_is_allowed(values, key, allowed):
    msg = error_of(values)
    assert msg.startswith("params/cpu/01_gradient_flow.yaml:")
    assert f"'{key}'" in msg and allowed in msg


def test_all_problems_reported_in_one_message():
    msg = error_of({"steps": 0, "solver": "bogus", "colour": 1})
    assert "'steps'" in msg and "'solver'" in msg and "'colour'" in msg


def test_float_written_without_a_dot_is_accepted():
    assert check({"lr": "3e-4"}).lr == pytest.approx(3e-4)
    assert check({"lr": 1}).lr == 1.0


def test_missing_data_is_a_parameter_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path))
    msg = error_of({})
    assert "'corpus'" in msg and "wikitext-2/wiki.valid.tokens" in msg and "ODEBOOK_DATA" in msg


def test_from_namespace_picks_only_the_study_fields():
    ns = {"steps": 70, "np": object(), "__name__": "__main__"}
    assert GradientFlowParams.from_namespace(ns).steps == 70


def test_yaml_errors_name_the_file(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("- a list\n- not a mapping\n")
    with pytest.raises(ParamError, match="x.yaml: must be a mapping"):
        load_yaml(bad)
    bad.write_text("steps: [unclosed\n")
    with pytest.raises(ParamError, match="x.yaml: not valid YAML"):
        load_yaml(bad)
    with pytest.raises(ParamError, match="parameter file not found"):
        load_yaml(tmp_path / "missing.yaml")


@pytest.mark.parametrize("profile", ["smoke", "cpu", "t4"])
def test_every_profile_file_is_valid(root, profile):
    for study in STUDIES:
        validate_file(study, root / "params" / profile / f"{study}.yaml")


def test_every_field_has_a_type_the_validator_knows():
    for cls in STUDIES.values():
        assert "\n" in cls.describe()
        for f in dataclasses.fields(cls):
            assert f.metadata, f"{cls.__name__}.{f.name} is not declared with spec()"


def test_time_indexed_parameters_are_checked_too():
    from odebook import studies
    TimeIndexedParams = studies.schema("02_time_indexed")

    with pytest.raises(ParamError) as info:
        TimeIndexedParams.from_mapping({"models": ["standard", "mamba"], "seq_len": 256, "alpha": 0.9}, "p.yaml")
    msg = str(info.value)
    assert "key 'models'" in msg and "'ti_mlp'" in msg  # lists what is allowed
    assert "key 'alpha' = 0.9: must be <= 0.5" in msg
    with pytest.raises(ParamError, match="must be <= max_seq_len = 128"):
        TimeIndexedParams.from_mapping({"seq_len": 256}, "p.yaml")
    with pytest.raises(ParamError, match="each model at most once"):
        TimeIndexedParams.from_mapping({"models": ["tong", "tong"]}, "p.yaml")


def test_ode_solver_parameters_are_checked_together():
    from odebook import studies
    ODESolverParams = studies.schema("05_ode_solvers")

    with pytest.raises(ParamError) as info:
        ODESolverParams.from_mapping({"nfe_budget": 6, "generation_solver": "euler", "integrators": ["rk4", "dopri5"],
                                      "sensitivities": ["adjoint"], "sweep_steps": [4, 4], "max_seq_len": 512,
                                      "ode_layers": [5, 6], "sensitivity": "backsolve"}, "05.yaml")
    msg = str(info.value)
    assert msg.startswith("05.yaml: invalid parameters for 05_ode_solvers")
    assert "key 'sensitivity' = 'backsolve': must be one of 'direct', 'adjoint', 'reversible'" in msg
    with pytest.raises(ParamError) as info:
        ODESolverParams.from_mapping({"nfe_budget": 6, "generation_solver": "euler", "integrators": ["rk4", "dopri5"],
                                      "sensitivities": ["adjoint"], "sweep_steps": [4, 4], "max_seq_len": 512,
                                      "ode_layers": [5, 6]}, "05.yaml")
    msg = str(info.value)
    for expected in ["key 'nfe_budget' = 6: must be a multiple of 4",
                     "key 'generation_solver' = 'euler': must be one of integrators",
                     "key 'sensitivities' = ['adjoint']: must include 'direct'",
                     "key 'sweep_steps' = [4, 4]: needs at least two different step counts",
                     "key 'max_seq_len' = 512: generation needs prompt_tokens + the longest generation = 1056",
                     "key 'ode_layers' = [5, 6]: layers must lie in 0..5"]:
        assert expected in msg
    with pytest.raises(ParamError, match="'reversible': steps back on a fixed grid"):
        ODESolverParams.from_mapping({"sensitivity": "reversible"}, "05.yaml")


def test_reversible_gradients_with_an_adaptive_solver_are_refused_before_any_compute():
    with pytest.raises(ParamError, match="'reversible': steps back on a fixed grid; solver 'dopri5' is adaptive"):
        GradientFlowParams.from_mapping({"sensitivity": "reversible", "solver": "dopri5"}, "01.yaml")


def test_a_study_changes_an_inherited_default_without_restating_its_rule():
    """``defaults`` keeps the field's type, bounds and help where the field is declared; only the default moves."""
    import dataclasses

    from odebook.params import LMParams, ParamError
    from odebook import studies
    TimeIndexedParams = studies.schema("02_time_indexed")

    field = {f.name: f for f in dataclasses.fields(TimeIndexedParams)}["n_seeds"]
    parent = {f.name: f for f in dataclasses.fields(LMParams)}["n_seeds"]
    assert TimeIndexedParams().n_seeds == 12 and LMParams().n_seeds == 1 and field.metadata == parent.metadata
    with pytest.raises(ParamError, match="n_seeds"):  # the inherited bound (at most 20) still holds
        TimeIndexedParams.from_mapping({"n_seeds": 21}, "test")
    with pytest.raises(TypeError, match="nonexistent"):
        @dataclasses.dataclass
        class Broken(LMParams):
            defaults = {"nonexistent": 1}


def test_looks_must_increase_below_n_seeds():
    with pytest.raises(ParamError, match=r"key 'looks' = \[5, 3\]: must increase and stay below n_seeds = 6"):
        GradientFlowParams.from_mapping({"n_seeds": 6, "looks": [5, 3]}, "test.yaml")
    with pytest.raises(ParamError, match=r"key 'looks' = \[3, 6\]"):
        GradientFlowParams.from_mapping({"n_seeds": 6, "looks": [3, 6]}, "test.yaml")
    assert GradientFlowParams.from_mapping({"n_seeds": 6, "looks": [3]}, "test.yaml").looks == [3]
    # the default, no interim looks, may be written out (a parameters cell holds it): [] is not "missing"
    assert GradientFlowParams.from_mapping({"n_seeds": 6, "looks": []}, "test.yaml").looks == []
