"""Every private torch entry point odebook uses is checked here against its public equivalent: a torch upgrade that
removes or changes one fails its test with a message naming the API and the torch version."""

import re
import warnings

import pytest
import torch
from packaging.requirements import Requirement

from odebook.nn import torch_private as tp

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


@pytest.mark.parametrize("name", list(tp.ENTRY_POINTS))
def test_every_private_entry_point_still_does_what_its_public_equivalent_does(name):
    """The check raises PrivateAPIError naming the API and the torch version; on a tested torch it must pass."""
    if name == "onednn_linear" and not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    tp.check(name)
    assert tp.usable(name)


def test_a_failing_check_names_the_api_and_the_torch_version_and_falls_back_with_one_warning(monkeypatch):
    def removed():
        raise AttributeError("'_OpNamespace' 'mkldnn' object has no attribute '_linear_pointwise'")

    monkeypatch.setitem(tp.ENTRY_POINTS, "onednn_linear", tp.ENTRY_POINTS["onednn_linear"]._replace(probe=removed))
    tp.usable.cache_clear()
    try:
        with pytest.raises(tp.PrivateAPIError) as error:
            tp.check("onednn_linear")
        message = str(error.value)
        assert "torch.ops.mkldnn._linear_pointwise" in message and torch.__version__ in message
        assert "no attribute '_linear_pointwise'" in message and "torch's own GEMM" in message
        with pytest.warns(RuntimeWarning, match=re.escape("torch.ops.mkldnn._linear_pointwise")):
            assert not tp.usable("onednn_linear")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the warning comes once, not at every product
            assert not tp.usable("onednn_linear")
    finally:
        tp.usable.cache_clear()


def test_without_a_usable_private_path_the_public_fallbacks_give_the_same_answers(monkeypatch):
    """functorch: unknown counts as active (torch's own GEMM); the profiler: allocations read per operation."""
    monkeypatch.setattr(tp, "usable", lambda name: False)
    assert tp.functorch_transforms_active()

    def allocations():
        a = torch.empty(1000)
        b = torch.empty(3000)
        del a
        return b.clone()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        allocations()
    assert _peak(tp.cpu_allocations(prof)) == _peak(tp._event_tree_allocations(prof)) == 12000 + 12000


def _peak(changes):
    current = peak = 0
    for _, size in sorted(changes):
        current += size
        peak = max(peak, current)
    return peak


def test_this_torch_is_in_the_tested_range_that_pyproject_declares(root):
    """pyproject's ``tested`` extra is the range TESTED_TORCH names (its plain dependency stays admissible, so that
    installing odebook never replaces a preinstalled torch, as Colab's)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    (tested,) = [r for r in project["optional-dependencies"]["tested"] if Requirement(r).name == "torch"]
    (first_major, first_minor), (last_major, last_minor) = tp.TESTED_TORCH
    assert tested == f"torch>={first_major}.{first_minor},<{last_major}.{last_minor + 1}"
    (plain,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "torch"]
    assert not any(s.operator in ("<", "<=", "==", "~=") for s in plain.specifier), \
        "an upper bound here would make pip replace a preinstalled torch (Colab's)"
    assert tp.in_tested_range(), f"torch {torch.__version__} is outside the tested range {tp.TESTED_TORCH}"


PRIVATE = re.compile(r"torch(\.[A-Za-z0-9_]+)*\._[A-Za-z]|from torch[A-Za-z0-9_.]*\._|\.kineto_results|"
                     r"experimental_event_tree")


def test_no_private_torch_name_is_used_outside_the_door(root):
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for folder in ("odebook", "benchmarks", "notebooks") for path in sorted((root / folder).rglob("*.py"))
             if path.name != "torch_private.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if PRIVATE.search(line.split("#")[0])]
    assert not found, "private torch entry points outside odebook/nn/torch_private.py:\n" + "\n".join(found)
