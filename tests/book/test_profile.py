"""ODEBOOK_PROFILE inside JupyterLab and Colab: "Run all" takes params/<profile>/<notebook>.yaml wherever the
parameters cell still holds its own value; edits and papermill's -p values win."""

import jupytext
import pytest

from odebook.book import colab, profile
from odebook.params import ParamError, load_yaml
from odebook import studies

from conftest import ROOT

STUDIES = {name: studies.schema(name) for name in studies.names()}


STUDY = "01_gradient_flow"


def cell_namespace() -> dict:
    nb = jupytext.read(ROOT / "notebooks" / f"{STUDY}.py")
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    namespace: dict = {}
    exec(cell.source, namespace)
    return namespace


def test_without_the_variable_nothing_changes(monkeypatch):
    monkeypatch.delenv(profile.PROFILE_ENV, raising=False)
    namespace = cell_namespace()
    assert profile.apply_profile(STUDIES[STUDY], namespace, ROOT) == "" and namespace == cell_namespace()


def test_the_profile_replaces_the_cells_values_but_not_edits_or_papermills(monkeypatch):
    monkeypatch.setenv(profile.PROFILE_ENV, "smoke")
    smoke = load_yaml(ROOT / "params" / "smoke" / f"{STUDY}.yaml")
    namespace = cell_namespace()
    namespace["architecture"] = {**namespace["architecture"], "d_model": 48}  # edited in the cell's group
    namespace["In"] = ["import os", "# Parameters\nsteps = 500\n"]  # injected by papermill, equal to the cell's
    namespace["steps"] = 500
    note = profile.apply_profile(STUDIES[STUDY], namespace, ROOT)
    params = STUDIES[STUDY].from_namespace(namespace)
    assert params.d_model == 48 and params.steps == 500
    assert all(getattr(params, k) == v for k, v in smoke.items() if k not in ("d_model", "steps"))
    assert note == (f"profile smoke ({ROOT / 'params' / 'smoke' / f'{STUDY}.yaml'}): {len(smoke) - 2} values "
                    "applied; kept your own d_model, steps")
    assert namespace["training"]["batch_size"] == smoke["batch_size"]  # written where the cell holds it


def test_a_profile_applies_into_the_cells_groups_and_leaves_the_cells_own_dicts_alone(monkeypatch):
    monkeypatch.setenv(profile.PROFILE_ENV, "smoke")
    namespace = cell_namespace()
    training = namespace["training"]
    profile.apply_profile(STUDIES[STUDY], namespace, ROOT)
    smoke = load_yaml(ROOT / "params" / "smoke" / f"{STUDY}.yaml")
    assert namespace["training"]["steps"] == smoke["steps"] != training["steps"]
    assert training == cell_namespace()["training"]
    assert "steps" not in namespace  # no second copy beside the group


def test_a_profile_that_is_not_a_folder_of_params_is_refused(monkeypatch):
    monkeypatch.setenv(profile.PROFILE_ENV, "../smoke")
    with pytest.raises(ParamError, match=r"ODEBOOK_PROFILE='../smoke': not a folder of .*known profiles: cpu, smoke, "):
        profile.apply_profile(STUDIES[STUDY], cell_namespace(), ROOT)


def test_a_wrong_value_in_the_profile_file_names_the_file(monkeypatch, tmp_path):
    (tmp_path / "params" / "mine").mkdir(parents=True)
    (tmp_path / "params" / "mine" / f"{STUDY}.yaml").write_text("steps: -3\n")
    monkeypatch.setenv(profile.PROFILE_ENV, "mine")
    with pytest.raises(ParamError, match=r"(?s)params/mine/01_gradient_flow.yaml.*'steps' = -3"):
        profile.apply_profile(STUDIES[STUDY], cell_namespace(), tmp_path)


def test_outside_a_checkout_the_profile_comes_from_the_repository(monkeypatch):
    """Colab installs odebook with pip (no params/ folder): the file is read from colab.PARAMS_URL (here a file://
    address standing in for the repository's raw files)."""
    monkeypatch.setattr(colab, "PARAMS_URL", (ROOT / "params").as_uri())
    monkeypatch.setenv(profile.PROFILE_ENV, "cpu")
    namespace = cell_namespace()
    note = profile.apply_profile(STUDIES[STUDY], namespace, None)
    cpu = load_yaml(ROOT / "params" / "cpu" / f"{STUDY}.yaml")
    assert note.startswith(f"profile cpu ({colab.PARAMS_URL}/cpu/{STUDY}.yaml)")
    assert all(getattr(STUDIES[STUDY].from_namespace(namespace), k) == v for k, v in cpu.items())
    monkeypatch.setattr(colab, "PARAMS_URL", (ROOT / "nowhere").as_uri())
    with pytest.raises(ParamError, match="could not read .*unset ODEBOOK_PROFILE"):
        profile.apply_profile(STUDIES[STUDY], cell_namespace(), None)


def test_a_machine_setting_the_last_runs_profile_set_does_not_stick(monkeypatch):
    """No parameters cell assigns a machine setting, so "Run all" does not put it back: a value only the last run's
    profile set goes back to its default before this run's profile (or none) applies; a value of the user's stays."""
    schema = STUDIES[STUDY]
    monkeypatch.setenv(profile.PROFILE_ENV, "smoke")
    namespace = cell_namespace()
    profile.apply_profile(schema, namespace, ROOT)
    assert schema.from_namespace(namespace).checkpoint_interval == 0  # smoke's
    namespace.update(cell_namespace())  # "Run all" again: the cell re-assigns the study's settings only
    assert "kept your own" not in profile.apply_profile(schema, namespace, ROOT)
    assert schema.from_namespace(namespace).checkpoint_interval == 0
    monkeypatch.delenv(profile.PROFILE_ENV)
    namespace.update(cell_namespace(), device="cpu")  # the user's own machine setting, added to the cell
    assert profile.apply_profile(schema, namespace, ROOT) == ""
    params = schema.from_namespace(namespace)
    assert params.checkpoint_interval == schema().checkpoint_interval and params.device == "cpu"
