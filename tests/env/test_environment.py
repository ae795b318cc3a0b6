"""environment.yml (conda) asks for what pyproject.toml (pip) asks for, from conda-forge alone, and the Makefile's
pinned torch lies in both ranges."""

import re


import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

CONDA_NAMES = {"pytorch": "torch"}  # conda-forge's name for a package -> its pip name


def _pip_requirements(root) -> dict[str, SpecifierSet]:
    """pyproject's dependencies and its dev extra, with the ranges of its "tested" extra where it names one (a
    fresh conda environment gets the tested torch)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    reqs = [Requirement(r) for r in project["dependencies"] + extras["dev"] + extras["tested"]]
    return {r.name.lower(): r.specifier for r in reqs}


def _conda_requirements(root) -> tuple[dict[str, SpecifierSet], dict]:
    env = yaml.safe_load((root / "environment.yml").read_text())
    conda, pip = {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip = dep["pip"]
            continue
        name, spec = re.match(r"([A-Za-z0-9_.-]+)\s*(.*)", dep).groups()
        conda[CONDA_NAMES.get(name, name).lower()] = SpecifierSet(spec.replace("=", "==") if re.match(r"=\d", spec)
                                                                  else spec)
    for dep in pip:
        if not dep.startswith("-e"):
            r = Requirement(dep)
            conda[r.name.lower()] = r.specifier
    return conda, env


def test_environment_yml_lists_the_same_dependencies_as_pyproject(root):
    conda, env = _conda_requirements(root)
    pip = _pip_requirements(root)
    conda.pop("python"), conda.pop("pip")
    assert conda == pip, {k: (conda.get(k), pip.get(k)) for k in set(conda) | set(pip) if conda.get(k) != pip.get(k)}
    assert env["channels"] == ["conda-forge"], "conda-forge only (the pytorch channel stopped at torch 2.5)"
    assert "-e ." in env["dependencies"][-1]["pip"]


def test_the_makefiles_torch_pin_satisfies_both_ranges(root):
    pin = re.search(r"^TORCH_SPEC\s*\?=\s*torch==(\S+)", (root / "Makefile").read_text(), re.M).group(1)
    conda, _ = _conda_requirements(root)
    assert pin in _pip_requirements(root)["torch"] and pin in conda["torch"]
    python = conda["python"] if "python" in conda else None
    requires = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python is not None and str(python) == requires
