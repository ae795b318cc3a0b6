"""One rule for every path parameter (issue 32): empty or absolute, refused before compute with one line naming the
file and the key; a file that is not a regular file is called what it is."""

import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from odebook.params import ParamError
from odebook import studies

from conftest import ROOT

STUDIES = {name: studies.schema(name) for name in studies.names()}


def _paths(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("path")]


def _smoke(study: str) -> dict:
    return yaml.safe_load((ROOT / "params" / "smoke" / f"{study}.yaml").read_text()) or {}


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_path_parameter_refuses_a_relative_path_with_the_same_line(study):
    names = _paths(STUDIES[study])
    assert "output_dir" in names
    for name in names:
        with pytest.raises(ParamError) as err:
            STUDIES[study].from_mapping({**_smoke(study), name: "ckpts/here"}, source="x.yaml")
        assert "x.yaml: invalid parameters" in str(err.value)
        assert f"key '{name}' = 'ckpts/here': must be an absolute path" in str(err.value)


def test_a_relative_checkpoint_dir_is_refused_and_an_absolute_one_is_the_users_say_so(tmp_path):
    study = STUDIES["01_gradient_flow"]
    with pytest.raises(ParamError, match="key 'checkpoint_dir' = 'ck': must be an absolute path"):
        study.from_mapping({**_smoke("01_gradient_flow"), "checkpoint_dir": "ck"}, source="x.yaml")
    assert study.from_mapping({**_smoke("01_gradient_flow"), "checkpoint_dir": str(tmp_path)},
                              source="x.yaml").checkpoint_dir == str(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_corpus_that_is_not_a_regular_file_is_called_so(tmp_path, kind):
    path = {"fifo": tmp_path / "pipe", "device": "/dev/zero", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ParamError) as err:
        STUDIES["01_gradient_flow"].from_mapping({**_smoke("01_gradient_flow"), "corpus": "files",
                                                  "text_file": str(path)}, source="x.yaml")
    assert f"key 'text_file' = '{path}': {path} is not a regular file" in str(err.value)
    assert "no such file" not in str(err.value)


@pytest.mark.parametrize("key", ["output_dir", "executor_folder", "checkpoint_dir"])
def test_a_folder_the_study_writes_may_not_be_the_checkouts_source_or_a_system_folder(root, tmp_path, key):
    study = STUDIES["01_gradient_flow"]
    inside = "inside the checkout"
    for folder, says in [(root / "notebooks" / "jobs", inside), (root, inside), (root / "docs" / "jobs", inside),
                         (root / "my_jobs", inside), (root / ".venv" / "x", inside),  # all but outputs/ (issue 71)
                         (Path("/etc"), "a system folder"), (Path("/"), "a system folder"),
                         (Path("/usr/local/x"), "a system folder")]:
        with pytest.raises(ParamError) as err:
            study.from_mapping({**_smoke("01_gradient_flow"), key: str(folder)}, source="x.yaml")
        assert f"key '{key}' = '{folder}': {says}" in str(err.value)
    for fine in (root / "outputs" / "mine", tmp_path / "jobs"):
        study.from_mapping({**_smoke("01_gradient_flow"), key: str(fine)}, source="x.yaml")


def test_executor_keys_that_cannot_apply_here_are_named_in_one_warning(monkeypatch):
    import shutil

    study = STUDIES["01_gradient_flow"]
    local = study.from_mapping({**_smoke("01_gradient_flow"), "slurm_partition": "gpu", "slurm_time_min": 30},
                               source="x.yaml")
    assert local.ignored_keys() == ("warning: slurm_time_min, slurm_partition ignored with executor: auto (set "
                                    "executor: submitit to use them)")
    submitit = study.from_mapping({**_smoke("01_gradient_flow"), "executor": "submitit", "slurm_partition": "gpu",
                                   "slurm_time_min": 30}, source="x.yaml")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert submitit.ignored_keys() == ("warning: slurm_partition ignored here: no sbatch is found, so submitit runs "
                                       "the jobs as subprocesses of this machine")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/sbatch")
    assert submitit.ignored_keys() == ""
    assert study.from_mapping(_smoke("01_gradient_flow"), source="x.yaml").ignored_keys() == ""


def test_a_slurm_partition_is_a_name_before_it_reaches_the_batch_script():
    """A partition reaches the script submitit hands to sbatch verbatim: "debug\\n#SBATCH --comment=x\\ntouch f" passed
    validation and wrote an #SBATCH line and a command (issue 71). Now only a SLURM name (or a comma list) passes, and
    it is one #SBATCH line of the script submitit writes."""
    from submitit.slurm.slurm import _make_sbatch_string

    study = STUDIES["01_gradient_flow"]
    for bad in ("debug\n#SBATCH --comment=injected\ntouch /tmp/x", "gpu debug", "'gpu'", "gpu;rm", "gpu,", "$(id)"):
        with pytest.raises(ParamError, match=r"key 'slurm_partition' = .*: a SLURM partition name"):
            study.from_mapping({**_smoke("01_gradient_flow"), "slurm_partition": bad}, source="x.yaml")
    plain = _make_sbatch_string(command="python job.py", folder="/tmp/jobs").splitlines()
    for good in ("", "gpu", "gpu,debug", "a100-80g.short"):
        p = study.from_mapping({**_smoke("01_gradient_flow"), "slurm_partition": good}, source="x.yaml")
        script = _make_sbatch_string(command="python job.py", folder="/tmp/jobs", partition=p.slurm_partition or None)
        added = [line for line in script.splitlines() if line not in plain]
        assert added == ([f"#SBATCH --partition={good}"] if good else []) and len(script.splitlines()) == len(
            plain) + bool(good)
