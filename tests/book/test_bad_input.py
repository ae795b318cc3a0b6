"""Every bad value stops before compute with one clean ParamError naming the source, the key and what is allowed —
never a traceback from inside the validator, never a value that runs silently."""

import dataclasses
import math
import os
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from odebook.params import INT_LIMIT, ParamError, injected_names, load_yaml
from odebook import studies
from odebook.studies import validate_file

GDNScalingParams = studies.schema("03_gdn_scaling")
GradientFlowParams = studies.schema("01_gradient_flow")
STUDIES = {name: studies.schema(name) for name in studies.names()}


def error_of(cls, values) -> str:
    with pytest.raises(ParamError) as info:
        cls.from_mapping(values, source="params/cpu/x.yaml")
    msg = str(info.value)
    assert msg.startswith("params/cpu/x.yaml:")
    return msg


@pytest.mark.parametrize("values, expected", [
    ({"lr": float("nan")}, "key 'lr' = nan: must be a finite number"),
    ({"lr": ".nan"}, "key 'lr' = '.nan': must be a finite number"),
    ({"grad_clip": float("inf")}, "key 'grad_clip' = inf: must be a finite number"),
    ({"weight_decay": float("nan")}, "key 'weight_decay'"),
    ({"alpha_init": float("nan")}, "key 'alpha_init'"),
    ({"lr_grid": [1e-3, float("nan")]}, "key 'lr_grid' = [0.001, nan]: must be a list of a finite number"),
    ({"lr_grid": []}, "key 'lr_grid' = []: needs at least 1 entry"),
    ({"mqar_pairs": 17}, "key 'mqar_pairs' = 17: needs at most mqar_keys = 16 keys"),
    ({"seed": 2**32}, f"key 'seed' = {2**32}: must be <= {INT_LIMIT}"),
    ({"seed": INT_LIMIT, "n_seeds": 2}, "seed + n_seeds + tuning_seeds - 1 (the last tuning seed) must be <="),
    ({"seed": INT_LIMIT, "n_seeds": 1}, "(the last tuning seed) must be <="),  # its tuning seed
    ({"seed": INT_LIMIT - 2, "n_seeds": 1, "tuning_seeds": 3}, "(the last tuning seed) must be <="),
    ({"steps": 10**30}, f"must be <= {INT_LIMIT}"),
    ({"lr": 10**400}, "key 'lr'"),  # an integer too large for a float
])
def test_bad_values_are_parameter_errors(values, expected):
    assert expected in error_of(GradientFlowParams, values)


def test_a_device_that_is_not_there_is_refused(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "key 'device' = 'cuda': this machine has no CUDA device" in error_of(GradientFlowParams, {"device": "cuda"})


def test_empty_curriculum_and_repeated_ladder_sizes_are_refused_before_training():
    assert "key 'curriculum' = []: needs at least 1 entry" in error_of(GDNScalingParams, {"curriculum": []})
    msg = error_of(GDNScalingParams, {"ladder_d": [128, 128, 256], "ladder_layers": [1, 1, 2]})
    assert "each size (width, layers) at most once" in msg
    GDNScalingParams.from_mapping({"ladder_d": [128, 128, 256], "ladder_layers": [1, 2, 2]}, "x.yaml")  # distinct


def test_a_key_given_twice_in_yaml_is_refused(tmp_path):
    path = tmp_path / "01.yaml"
    path.write_text("steps: 10\nlr: 0.001\nsteps: 20\n")
    with pytest.raises(ParamError, match=r"01.yaml: not valid YAML \(line 3\): key 'steps' is given twice "
                                         r"\(lines 1 and 3\)"):
        load_yaml(path)
    path.write_text("outer:\n  a: 1\n  a: 2\n")
    with pytest.raises(ParamError, match="key 'a' is given twice"):
        load_yaml(path)
    path.write_bytes(b"steps: 1\nlr: \xff\xfe\n")
    with pytest.raises(ParamError, match="01.yaml: not UTF-8 text"):
        load_yaml(path)


# -- the validator never crashes -----------------------------------------------------------------------------------
def _bad_values(tp) -> dict[str, object]:
    """A bad value of each class for a field of type ``tp``: name -> value."""
    wrong = {int: "seven", float: "seven", bool: 3, str: 3}
    if typing.get_origin(tp) is list:
        (inner,) = typing.get_args(tp)
        return {"empty list": [], "null": None, "nan": [float("nan")], "wrong type": "seven",
                "null entry": [None],
                "huge": [10**30] if inner is int else [1e308] if inner is float else ["x" * 10**4]}
    return {"empty list": [], "null": None, "nan": float("nan"), "wrong type": wrong[tp], "nested": {"a": 1},
            "huge": 10**30 if tp in (int, float) else "x" * 10**4}


# Bad values a study accepts on purpose: a very large size or string is legal (what fits in memory is not a
# parameter rule); every other class of bad value must be refused.
ACCEPTED = {"huge"}


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_field_refuses_bad_values_cleanly(study):
    cls = STUDIES[study]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        for kind, value in _bad_values(hints[f.name]).items():
            if kind == "empty list" and f.metadata.get("min_len") == 0:
                continue  # a list whose default is empty (looks: no interim looks) takes [] by design
            try:
                cls.from_mapping({f.name: value}, source="p.yaml")
            except ParamError as err:  # one line per problem, naming this key (a huge size may trip a related key)
                assert kind == "huge" or f"key '{f.name}' = " in str(err), (f.name, kind, str(err))
                continue
            # no other exception escaped; an accepted value must be an accepted class and a usable value
            assert kind in ACCEPTED, f"{study}: {f.name} = {value!r} ({kind}) was accepted"
            assert not (isinstance(value, float) and math.isnan(value))


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_unknown_keys_of_every_study_get_a_suggestion(study):
    name = next(f.name for f in dataclasses.fields(STUDIES[study]) if len(f.name) > 4)
    msg = error_of(STUDIES[study], {name[:-1]: 1})
    assert f"unknown key '{name[:-1]}' (did you mean '{name}'?)" in msg


# -- papermill's injected parameters -------------------------------------------------------------------------------
INJECTED = "# Parameters\nstepz = 3\nlr = 0.01\n"


def test_injected_names_are_read_from_the_input_history():
    assert injected_names(["import numpy", "steps = 1", INJECTED]) == {"stepz", "lr"}
    assert injected_names(None) == set() and injected_names(["# Parameters\nnot python ("]) == set()


def test_a_misspelt_papermill_parameter_is_an_unknown_key():
    namespace = {"In": ["", "steps = 500\nlr = 3e-4", INJECTED], "stepz": 3, "lr": 0.01, "steps": 500}
    with pytest.raises(ParamError) as info:
        GradientFlowParams.from_namespace(namespace)
    msg = str(info.value)
    assert msg.startswith("papermill parameters (-p/-f): invalid parameters for 01_gradient_flow")
    assert "unknown key 'stepz' (did you mean 'steps'?)" in msg
    namespace = {"In": ["", "# Parameters\nlr = 0.01\n"], "lr": 0.01, "np": object()}
    assert GradientFlowParams.from_namespace(namespace).lr == 0.01  # known names and notebook globals are fine


def test_a_papermill_name_wins_over_its_group_and_a_group_papermill_gave_takes_defaults_for_what_it_leaves_out():
    injected = "# Parameters\nlr = 0.01\ntraining = {'steps': 100}\n"
    namespace = {"In": ["", injected], "lr": 0.01, "training": {"steps": 100}, "architecture": {"d_model": 48}}
    params = GradientFlowParams.from_namespace(namespace)
    defaults = GradientFlowParams()
    assert (params.lr, params.steps, params.d_model) == (0.01, 100, 48)
    assert (params.batch_size, params.n_layer) == (defaults.batch_size, defaults.n_layer)


@pytest.mark.parametrize("group, says", [({"stepz": 3}, "unknown key 'stepz' in 'training' (did you mean 'steps'?)"),
                                         ({"d_model": 48}, "unknown key 'd_model' in 'training' (it is in "
                                                           "'architecture')"),
                                         (np, "'training' = <module 'numpy'"),
                                         ({"steps": -3}, "key 'steps' = -3: must be >= 1")])
def test_a_wrong_group_is_one_error_naming_the_group(group, says):
    with pytest.raises(ParamError, match="invalid parameters for 01_gradient_flow") as info:
        GradientFlowParams.from_namespace({"training": group})
    assert says in str(info.value)


@pytest.mark.parametrize("option, text, says", [("-y", "[1, 2]", "dictionary update sequence"),
                                                ("-y", "5", "'int' object is not iterable"),
                                                ("-f", "- steps\n- 3\n", "dictionary update sequence")])
def test_papermill_itself_stops_on_parameters_that_are_not_a_mapping_before_any_kernel(tmp_path, root, option, text,
                                                                                        says):
    """papermill applies -y/-f/-b in its own command line, before it opens the notebook: a YAML that is not a mapping
    ends in papermill's traceback, and no code of the book runs that could say it in one line (README: the limit). It
    stops before any kernel starts or any file is written."""
    if option == "-f":
        (tmp_path / "list.yaml").write_text(text)
        text = str(tmp_path / "list.yaml")
    out = tmp_path / "out.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", str(root / "notebooks" / "01_gradient_flow.ipynb"),
                           str(out), option, text], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and says in done.stderr.splitlines()[-1] and "papermill/cli.py" in done.stderr
    assert not out.exists() and "Executing" not in done.stderr


@pytest.mark.parametrize("profile", ["smoke", "cpu", "t4"])
def test_profiles_stay_valid_under_the_stricter_rules(root, profile):
    for study in STUDIES:
        validate_file(study, root / "params" / profile / f"{study}.yaml")


# -- a broken data mirror ------------------------------------------------------------------------------------------
def _mirror_with(tmp_path, shared, broken: str, content: bytes):
    """A copy of the shared mirror (links) in which the file ``broken`` holds ``content``."""
    for src in shared.rglob("*"):
        if src.is_file():
            dst = tmp_path / src.relative_to(shared)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src)
    (tmp_path / broken).unlink()
    (tmp_path / broken).write_bytes(content)
    return tmp_path


def _mirror_without(tmp_path, name: str):
    """A copy of the shared mirror (links) without the file ``name``; skipped where there is no shared mirror."""
    shared = pytest.importorskip("conftest").SHARED_DATA
    if not shared.is_dir():
        pytest.skip("no shared data mirror beside the checkout")
    mirror = _mirror_with(tmp_path, shared, name, b"")
    (mirror / name).unlink()
    return mirror


VALID = "wikitext-2/wiki.valid.tokens"
BPE = "tiktoken/6d1cbeee0f20b3d9449abfede4726ed8212e3aee"


@pytest.mark.parametrize("broken, content, expected", [
    (VALID, b"", "wiki.valid.tokens is empty"),
    (VALID, b" = Valkyria = \n the first lines of an article cut mid-", "does not end with a line break (truncated)"),
    (VALID, " = Ünï".encode()[:-1], "ends inside a UTF-8 character"),
    (VALID, bytes(range(256)) * 40, "is not UTF-8 text"),
    (VALID, b"text\x00\x00\x00 binary\n", "holds NUL bytes"),
    (BPE, b"#version: 0.2\nTruncated\n", "is damaged: its sha256 is not tiktoken's"),
])
def test_a_broken_mirror_file_is_a_parameter_error(tmp_path, monkeypatch, broken, content, expected):
    shared = pytest.importorskip("conftest").SHARED_DATA
    if not shared.is_dir():
        pytest.skip("no shared data mirror beside the checkout")
    monkeypatch.setenv("ODEBOOK_DATA", str(_mirror_with(tmp_path, shared, broken, content)))
    msg = error_of(GradientFlowParams, {"tokenizer": "gpt2"})
    assert "key 'corpus' = 'wikitext2'" in msg and expected in msg and broken.split("/")[0] in msg
    assert len(msg.splitlines()) == 2  # the header and one line naming the file


def test_a_missing_tiktoken_file_is_named(tmp_path, monkeypatch):
    mirror = _mirror_without(tmp_path, BPE)
    monkeypatch.setenv("ODEBOOK_DATA", str(mirror))
    assert f"tiktoken/ has no {BPE.split('/')[1]} (tiktoken's cache of https://" in \
        error_of(GradientFlowParams, {"tokenizer": "gpt2"})


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_mirror_file_that_is_not_a_regular_file_is_called_so_before_it_is_read(tmp_path, monkeypatch, kind):
    """A FIFO would block the check's read for good, /dev/zero would fill the memory, a folder gave a traceback: each
    is one line naming the file, said before anything reads it."""
    mirror = _mirror_without(tmp_path, VALID)
    if kind == "fifo":
        os.mkfifo(mirror / VALID)
    elif kind == "device":
        (mirror / VALID).symlink_to("/dev/zero")
    else:
        (mirror / VALID).mkdir()
    monkeypatch.setenv("ODEBOOK_DATA", str(mirror))
    msg = error_of(GradientFlowParams, {"tokenizer": "bytes"})
    assert f"{VALID} is not a regular file (a folder, device or pipe)" in msg
    assert len(msg.splitlines()) == 2


def test_a_tiktoken_cache_entry_that_is_not_a_regular_file_is_called_so(tmp_path, monkeypatch):
    mirror = _mirror_without(tmp_path, BPE)
    os.mkfifo(mirror / BPE)
    monkeypatch.setenv("ODEBOOK_DATA", str(mirror))
    assert f"{BPE} is not a regular file" in error_of(GradientFlowParams, {"tokenizer": "gpt2"})


@pytest.mark.parametrize("valid, n", [(b"One short story.\n", 1), (b"A story.\n\nAnother one.\n", 2)])
def test_study_04_refuses_a_validation_set_of_fewer_stories_than_it_evaluates(tmp_path, monkeypatch, valid, n):
    shared = pytest.importorskip("conftest").SHARED_DATA
    if not shared.is_dir():
        pytest.skip("no shared data mirror beside the checkout")
    name = "tinystories/valid-blankline-separated.txt"
    monkeypatch.setenv("ODEBOOK_DATA", str(_mirror_with(tmp_path, shared, name, valid)))
    msg = error_of(STUDIES["04_mixed_training"], {"batch_size": 2, "eval_batches": 4})
    assert f"key 'eval_batches': {tmp_path / name} holds {n} stor" in msg and "the study needs 8" in msg
    assert len(msg.splitlines()) == 2
    STUDIES["04_mixed_training"].from_mapping({"batch_size": 1, "eval_batches": n}, "x.yaml")


def test_an_empty_parameter_file_is_refused_not_run_at_the_notebooks_own_scale(tmp_path):
    for text in ("", "# only a comment\n", "\n\n"):
        (tmp_path / "01.yaml").write_text(text)
        with pytest.raises(ParamError, match=r"01.yaml: holds no parameters; an empty file would run the notebook's "
                                             r"own defaults \(the t4 profile's scale"):
            load_yaml(tmp_path / "01.yaml")
    (tmp_path / "01.yaml").write_text("# the notebook's own defaults, on purpose (as params/t4/)\n{}\n")
    assert load_yaml(tmp_path / "01.yaml") == {}


def test_papermills_parameter_file_with_a_key_twice_is_refused_by_the_kernel(tmp_path, root):
    """papermill parses -f itself and keeps the last value; the notebook's first cell reads the same file again by the
    profile files' rules and stops in one line, before any data or model."""
    (tmp_path / "p.yaml").write_text("steps: 3\nlr: 0.001\nsteps: 5\n")
    out = tmp_path / "out.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", str(root / "notebooks" / "01_gradient_flow.ipynb"),
                           str(out), "-f", "p.yaml", "--cwd", str(root / "notebooks")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PWD": str(tmp_path)})
    assert done.returncode == 1
    assert "papermill -f p.yaml: not valid YAML (line 3): key 'steps' is given twice (lines 1 and 3)" in done.stderr


def test_papermills_command_line_is_read_by_the_strict_rules(tmp_path, monkeypatch):
    """The same check without a kernel: a fake parent process whose command line is papermill's."""
    from odebook.params.papermill_cli import check_papermill_files

    fake = tmp_path / "proc"
    fake.mkdir()
    (fake / "cwd").symlink_to(tmp_path)
    (fake / "environ").write_bytes(b"PWD=/nowhere\0")
    (tmp_path / "ok.yaml").write_text("steps: 3\n")
    (tmp_path / "twice.yaml").write_text("steps: 3\nsteps: 5\n")
    real = Path
    monkeypatch.setattr("odebook.params.papermill_cli.Path",
                        lambda p, *a: fake if str(p).startswith("/proc/") else real(p, *a))
    for argv, says in [(["papermill", "a.ipynb", "b.ipynb", "-f", "ok.yaml"], None),
                       (["papermill", "a", "b", "-y", "lr: 1\nlr: 2\n"], "papermill -y: not valid YAML"),
                       (["python", "-m", "papermill", "a", "b", "-b", "bHI6IDEKbHI6IDIK"], "papermill -b: not valid"),
                       (["jupyter", "lab", "-f", "missing.yaml"], None),
                       # every spelling papermill's parser accepts (issue 71: these ran with the last value)
                       (["papermill", "a", "b", "--parameters_file=twice.yaml"], "papermill --parameters_file "
                                                                                 "twice.yaml: not valid YAML"),
                       (["papermill", "a", "b", "--parameters_file", "twice.yaml"], "not valid YAML"),
                       (["papermill", "a", "b", "-ftwice.yaml"], "papermill -f twice.yaml: not valid YAML"),
                       (["papermill", "a", "b", "--parameters_yaml=lr: 1\nlr: 2\n"], "papermill --parameters_yaml: "),
                       (["papermill", "a", "b", "-ylr: 1\nlr: 2\n"], "papermill -y: not valid YAML"),
                       (["papermill", "a", "b", "--parameters_base64=bHI6IDEKbHI6IDIK"], "papermill --parameters_b")]:
        (fake / "cmdline").write_bytes("\0".join(argv).encode() + b"\0")
        if says is None:
            check_papermill_files(1)
        else:
            with pytest.raises(ParamError, match=says):
                check_papermill_files(1)
