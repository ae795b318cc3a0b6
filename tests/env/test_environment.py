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
        exact = re.match(r"=(\d\S*)$", spec)  # conda's "=3.11" is "3.11.*"
        conda[CONDA_NAMES.get(name, name).lower()] = SpecifierSet(f"=={exact.group(1)}.*" if exact else spec)
    for dep in pip:
        if not dep.startswith("-e"):
            r = Requirement(dep)
            conda[r.name.lower()] = r.specifier
    return conda, env


def test_environment_yml_lists_the_same_dependencies_as_pyproject(root):
    conda, env = _conda_requirements(root)
    pip = _pip_requirements(root)
    conda.pop("python"), conda.pop("pip")
    torch = conda.pop("torch")  # pinned (the next test); pyproject asks for a range that the pin must satisfy
    assert str(torch).startswith("==") and str(torch)[2:].rstrip(".*") in pip.pop("torch")
    assert conda == pip, {k: (conda.get(k), pip.get(k)) for k in set(conda) | set(pip) if conda.get(k) != pip.get(k)}
    assert env["channels"] == ["conda-forge"], "conda-forge only (the pytorch channel stopped at torch 2.5)"
    assert "-e ." in env["dependencies"][-1]["pip"]


def test_the_pins_are_the_versions_the_committed_reports_ran_with(root):
    """The Makefile's torch pin and environment.yml's python and pytorch pins are those of every committed cpu
    report's manifest (torch without its build tag), within pyproject's ranges. A GPU profile's reports ran on the
    lent GPU machine's own torch: within the extra "tested" range and requires-python."""
    import json

    pin = re.search(r"^TORCH_SPEC\s*\?=\s*torch==(\S+)", (root / "Makefile").read_text(), re.M).group(1)
    conda, _ = _conda_requirements(root)
    assert pin in _pip_requirements(root)["torch"] and str(conda["torch"]) == f"=={pin}.*"
    requires = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    manifests = [json.loads(p.read_text())["packages"] for p in (root / "reports").glob("cpu/*/manifest.json")]
    assert manifests
    for packages in manifests:
        assert packages["torch"].split("+")[0] == pin
        assert packages["python"] in conda["python"] and packages["python"] in SpecifierSet(requires)
    tested = _pip_requirements(root)["torch"]  # the extra "tested": torch>=2.11,<2.14
    for path in (root / "reports").glob("*/*/manifest.json"):
        packages = json.loads(path.read_text())["packages"]
        assert packages["torch"].split("+")[0] in tested and packages["python"] in SpecifierSet(requires), path


def test_installing_gives_no_setuptools_deprecation_warning(root):
    """pyproject.toml as setuptools reads it at install: no warning for the user to read (project.license was a
    table, which setuptools deprecates for an SPDX string)."""
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), root / "pyproject.toml")
    assert not [str(w.message) for w in caught if "Deprecation" in w.category.__name__]
