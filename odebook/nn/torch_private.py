"""Every private torch entry point odebook uses, behind one door: each in a small named function that says what it
is, and a check that holds it to its public equivalent.

private entry point                                    used by                        public fallback
torch.ops.mkldnn._linear_pointwise (and .binary)       odebook.nn.gemm, study.flops   torch's own GEMM (F.linear, mm)
torch._C._are_functorch_transforms_active              odebook.nn.gemm                assume a transform is active
profiler event tree (kineto_results, _EventType)       odebook.study.measure          the profiler's per-operation
                                                                                      memory (misses a temporary an
                                                                                      operation frees inside itself)

Tested on torch 2.11 and 2.13 (``TESTED_TORCH``; pyproject's ``tested`` extra names the same range). Outside that
range nothing is refused: pyproject's plain dependency stays admissible, so installing odebook never replaces a
preinstalled torch (Colab's); instead ``usable(name)`` runs the entry point's check once, at its first use, and
where a torch upgrade removed or changed it, warns once (naming the API and the torch version) and odebook takes the
public fallback. tests/nn/test_torch_private.py runs every check and fails with the same message.
(``torch.softmax(..., out=)``, which the sliced head uses in place, is public: softmax.int_out.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable
from typing import NamedTuple

import torch

__all__ = ["TESTED_TORCH", "ENTRY_POINTS", "PrivateAPIError", "in_tested_range", "check", "usable",
           "onednn_linear", "onednn_linear_add", "onednn_linear_op", "functorch_transforms_active",
           "cpu_allocations", "quiet_stderr"]

TESTED_TORCH = ((2, 11), (2, 13))  # the first and the last (major, minor) odebook was tested with


class PrivateAPIError(RuntimeError):
    """A private torch entry point is missing or no longer does what its public equivalent does."""


def _version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def in_tested_range() -> bool:
    """Whether this torch lies in TESTED_TORCH."""
    return TESTED_TORCH[0] <= _version() <= TESTED_TORCH[1]


# --- oneDNN's fp32 inner product: the kernel torch's compiler calls for linear layers on the CPU --------------------

def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight.t() (+ bias) by oneDNN's inner product, unchecked: x [n, k], weight [m, k] (row- or column-major
    without gaps, see odebook.nn.gemm._plain). Public equivalent: F.linear(x, weight, bias)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def onednn_linear_add(x: torch.Tensor, other: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """other + x @ weight.t() by oneDNN, as a new tensor. Public equivalent: torch.addmm(other, x, weight.t())."""
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, weight, None, "add")


def onednn_linear_op():
    """The operator itself (both overloads), for torch.utils.flop_counter's custom_mapping."""
    return torch.ops.mkldnn._linear_pointwise


def _probe_onednn_linear() -> None:
    if not torch.backends.mkldnn.is_available():
        raise RuntimeError("this torch was built without oneDNN")
    g = torch.Generator().manual_seed(0)
    x, w, b, c = (torch.randn(*shape, generator=g) for shape in ((5, 7), (3, 7), (3,), (5, 3)))
    for got, want, what in ((onednn_linear(x, w, b), torch.nn.functional.linear(x, w, b), "F.linear"),
                            (onednn_linear(x, w.t().contiguous().t()), x @ w.t(), "x @ w.t() (column-major w)"),
                            (onednn_linear_add(x, c, w), torch.addmm(c, x, w.t()), "torch.addmm")):
        if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise RuntimeError(f"differs from {what}")


# --- functorch: whether a torch.func transform (vmap, jacrev, grad) is tracing the current call -----------------------

def functorch_transforms_active() -> bool:
    """Whether a torch.func transform is active here: kernels without a batching rule (oneDNN's) must then not run.
    Fallback, where the private query is unusable: True (every product goes to torch's own GEMM)."""
    return torch._C._are_functorch_transforms_active() if usable("functorch_transforms_active") else True


def _probe_functorch() -> None:
    query = torch._C._are_functorch_transforms_active
    seen = []
    torch.func.vmap(lambda z: seen.append(query()) or z)(torch.zeros(2))
    torch.func.jacrev(lambda z: seen.append(query()) or z)(torch.zeros(2))
    if query() is not False or seen != [True, True]:
        raise RuntimeError(f"outside any transform {query()!r}, inside vmap and jacrev {seen} (expected False, "
                           "[True, True])")


# --- the profiler's event tree: every allocation and free, also inside an operation ----------------------------------

def _event_tree_allocations(prof: torch.profiler.profile) -> list[tuple[int, int]]:
    """(time in ns, bytes: + allocated, − freed) of every CPU allocation and free in the profiler's event tree."""
    from torch._C._profiler import _EventType

    changes, nodes = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while nodes:
        node = nodes.pop()
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            changes.append((node.start_time_ns, node.extra_fields.alloc_size))
        nodes.extend(node.children)
    return changes


def _per_operation_allocations(prof: torch.profiler.profile) -> list[tuple[int, int]]:
    """The public fallback: each operation's own net allocation at its start (µs → ns)."""
    return [(int(e.time_range.start * 1000), e.self_cpu_memory_usage) for e in prof.events()
            if e.self_cpu_memory_usage]


def cpu_allocations(prof: torch.profiler.profile) -> list[tuple[int, int]]:
    """(ns, ± bytes) of the CPU allocations and frees a ``profile(profile_memory=True)`` recorded: from the event
    tree, which sees a temporary an operation frees before it returns; fallback, the per-operation totals, which net
    such a temporary out."""
    return _event_tree_allocations(prof) if usable("profiler_event_tree") else _per_operation_allocations(prof)


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2: the CPU profiler writes trace lines ("USDT: … profiler_start") there."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _probe_event_tree() -> None:
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        a = torch.empty(1000)  # 4,000 bytes
        b = torch.empty(3000)  # 12,000 bytes
        del a, b
    changes = sorted(_event_tree_allocations(prof))
    if [size for _, size in changes] != [4000, 12000, -4000, -12000]:
        raise RuntimeError(f"recorded {changes} for two allocations of 4,000 and 12,000 bytes and their frees")


# --- the register ---------------------------------------------------------------------------------------------------

class EntryPoint(NamedTuple):
    api: str  # what it is called in torch
    fallback: str  # what odebook does without it
    probe: Callable[[], None]  # raises if it is missing or differs from its public equivalent


ENTRY_POINTS = {
    "onednn_linear": EntryPoint("torch.ops.mkldnn._linear_pointwise", "torch's own GEMM (F.linear, torch.mm)",
                                _probe_onednn_linear),
    "functorch_transforms_active": EntryPoint("torch._C._are_functorch_transforms_active",
                                              "torch's own GEMM for every product", _probe_functorch),
    "profiler_event_tree": EntryPoint("the profiler's event tree (kineto_results.experimental_event_tree, "
                                      "torch._C._profiler._EventType)",
                                      "per-operation memory totals (a temporary freed inside an operation is missed)",
                                      _probe_event_tree),
}


def check(name: str) -> None:
    """Raise PrivateAPIError, naming the API and this torch's version, if entry point ``name`` is missing or no
    longer agrees with its public equivalent."""
    entry = ENTRY_POINTS[name]
    try:
        entry.probe()
    except Exception as error:  # noqa: BLE001 — whatever a changed API raises, it is reported as that API's
        (first, first_minor), (last, last_minor) = TESTED_TORCH
        raise PrivateAPIError(
            f"torch {torch.__version__}: {entry.api} is missing or changed ({type(error).__name__}: {error}); "
            f"odebook was tested with torch {first}.{first_minor}–{last}.{last_minor} and falls back to "
            f"{entry.fallback}") from error


@functools.cache
def usable(name: str) -> bool:
    """Whether entry point ``name`` may be used: its check, run once per process; a failure warns once."""
    try:
        check(name)
    except PrivateAPIError as error:
        warnings.warn(str(error), RuntimeWarning, stacklevel=2)
        return False
    return True
