"""A study's passes counted — each kind of pass's FLOPs (odebook.study.flops) and the kernels it would launch on a GPU,
once per model and batch (``counted``) — and what that work costs on a GPU that was not measured here (a T4, for the
Colab user): its arithmetic at a share of the GPU's peak plus a cost for every kernel it launches.

The models of this book are small (d 256, batches of 8–32 sequences): a training step is several hundred to a few
thousand kernels of microseconds each, and the time goes to launching them — the host's Python, autograd and
dispatcher work for each op — not to arithmetic, which alone puts such steps an order of magnitude under what they take
on a GPU. So a pass costs

    FLOPs / (``FRACTION`` · the GPU's fp16 peak)  +  launches · ``LAUNCH``

with its launches counted on the CPU (``Launches``: every innermost aten op torch's profiler records that runs a kernel
— not views, allocations or reads of a scalar back to the host) and a training step's optimizer (clipping, fused AdamW)
counted on the model's own parameters (``optimizer_launches``). ``LAUNCH`` is fitted to the training steps the book has
measured on GPUs (tests/book/test_passes.py records them and holds each within 2×): it is mostly the host's cost per
op, so a slower host (Colab's) makes the estimate low. ``FRACTION`` of the fp16 peak is what small models' matrix
products are taken to reach — not measured: the recorded steps are launch-bound and cannot tell it. Launches counted on
the CPU in fp32 miss the casts fp16 autocast adds on a GPU and count the CPU's GEMM as one op; the fit absorbs both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from odebook.nn.torch_private import quiet_stderr
from odebook.study.plan import Runs, Work
from odebook.study.flops import count_flops
from odebook.training.runtime import Precision

__all__ = ["GPU", "T4", "H100", "H200", "FRACTION", "LAUNCH", "Launches", "count_launches",
           "optimizer_launches", "seconds", "bound", "on", "one_pass", "pass_flops", "each_kind", "counted", "timed",
           "rough_flops", "signature", "launches", "gpu_work"]


@dataclasses.dataclass(frozen=True)
class GPU:
    name: str
    flops: float  # fp16 tensor-core peak, dense (the vendor's datasheet)
    memory: float  # bytes a run can use


T4 = GPU("T4", 65e12, 15e9)  # Colab reports 15 GB of its 16
H100 = GPU("H100", 989e12, 80e9)  # SXM
H200 = GPU("H200", 989e12, 141e9)
FRACTION = 0.25
# seconds per kernel launched: fitted to the measured GPU steps (tests/book/test_passes.py: the geometric mean of each
# step's measured time less its arithmetic, over its launches)
LAUNCH = 30e-6

_NO_KERNEL = {"empty", "empty_strided", "empty_like", "detach", "alias", "lift_fresh", "_local_scalar_dense"}


@functools.cache
def _launches_a_kernel(name: str) -> bool:
    """Whether aten op ``name`` runs a kernel: not a view of its input, an allocation or a scalar read back to the
    host (a wait, not a kernel)."""
    packet = getattr(torch.ops.aten, name, None)
    views = packet is not None and any(getattr(packet, o).is_view for o in packet.overloads())
    return not views and name not in _NO_KERNEL


class Launches:
    """Counts the aten ops run inside it that would each launch a kernel on a GPU (``n``): the innermost aten ops
    torch's profiler records (a composite op such as linear counts as the ops it runs; a CPU foreach op as one op per
    tensor, where a GPU launches one kernel for many: the fit of ``LAUNCH`` absorbs it), less views, allocations and
    reads of a scalar back to the host (``_launches_a_kernel``)."""

    def __enter__(self) -> "Launches":
        self.n = 0
        self._profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        with quiet_stderr():  # the profiler's trace lines at its start and stop ("USDT: … profiler_start")
            self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        with quiet_stderr():
            self._profile.__exit__(*exc)
        aten = [e for e in self._profile.events() if e.name.startswith("aten::")]
        self.n = sum(1 for e in aten if not any(c.name.startswith("aten::") for c in e.cpu_children)
                     and _launches_a_kernel(e.name.removeprefix("aten::")))


def count_launches(fn: Callable[[], object]) -> int:
    """Kernels ``fn()`` would launch on a GPU (``Launches``)."""
    with Launches() as counter:
        fn()
    return counter.n


def _optimizer_step(model: nn.Module) -> Callable[[], None]:
    """What a training step does after its backward (odebook.training.train) on ``model``'s parameters: clip the
    gradients' norm and take a fused AdamW step (on gradients of zeros), its state allocated by a first step."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [torch.zeros_like(p) for p in params]
    optimizer = torch.optim.AdamW(params, lr=0.0, fused=True)

    def step() -> None:
        for p, g in zip(params, grads):
            p.grad = g
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        optimizer.step()

    step()
    return step


def optimizer_launches(model: nn.Module) -> int:
    """Kernels a training step launches after its backward: clipping and the fused AdamW step (``_optimizer_step``),
    counted at the second step (the first allocates the optimizer's state)."""
    n = count_launches(_optimizer_step(model))
    model.zero_grad(set_to_none=True)
    return n


def seconds(flops: float, launches: float, gpu: GPU = T4) -> float:
    """A GPU's seconds for work of ``flops`` FLOPs in ``launches`` kernels (module docstring)."""
    return flops / (FRACTION * gpu.flops) + launches * LAUNCH


def bound(flops: float, launches: float, gpu: GPU = T4) -> str:
    """Which part of ``seconds`` is the larger: "launch-bound" or "arithmetic-bound"."""
    return "launch-bound" if launches * LAUNCH >= flops / (FRACTION * gpu.flops) else "arithmetic-bound"


def on(batch: Any, device: torch.device) -> Any:
    return batch.to(device) if isinstance(batch, torch.Tensor) else type(batch)(on(b, device) for b in batch)


def one_pass(model: nn.Module, work: Work, batch: Any, precision: Precision) -> Callable[[], None]:
    """One training step's forward and backward (the optimiser's update is element-wise), or one forward pass."""
    def step() -> None:
        model.train(work.train)
        with torch.set_grad_enabled(work.train), precision.autocast():
            loss = work.loss(model, batch)
        if work.train:
            model.zero_grad(set_to_none=True)
            loss.backward()
    return step


def pass_flops(model: nn.Module, work: Work, precision: Precision) -> float:
    """FLOPs of one pass of ``work``, or NaN where torch's counter cannot follow it (the adjoint method calls
    autograd.grad inside its backward)."""
    try:
        return float(count_flops(one_pass(model, work, on(work.batch(), precision.device), precision)))
    except RuntimeError:
        return math.nan


def each_kind(plan_: list[Runs], precision: Precision, train_only: bool,
              measure: Callable[[nn.Module, Work], Any]) -> list[tuple[Runs, Work, Any]]:
    """Each run's work with ``measure(model, work)``, measured once per kind of pass: by its model's ``signature``, its
    batch's shapes, its loss and whether it trains (a plan builds each run's model and batches afresh, often the
    same)."""
    out, seen, signatures = [], {}, {}
    for runs in plan_:
        model = None
        for work in (w for w in runs.work if w.train or not train_only):
            if id(runs.build) not in signatures:
                model = runs.build().to(precision.device)
                signatures[id(runs.build)] = signature(model)
            key = (signatures[id(runs.build)], signature(work.batch()), id(work.loss), work.train)
            if key not in seen:
                model = runs.build().to(precision.device) if model is None else model
                seen[key] = measure(model, work)
            out.append((runs, work, seen[key]))
    return out


def counted(plan_: list[Runs], precision: Precision, train_only: bool, kernels: bool = True
            ) -> list[tuple[Runs, Work, tuple]]:
    """Each run's work with (its FLOPs, NaN where torch cannot count them; the FLOPs its time is scaled by: its own,
    or for such a training step its forward pass's; the kernels it would launch on a GPU, a training step's with its
    optimizer's, and for such a step three times its forward pass's — 0 unless ``kernels``: the profiler that counts
    them costs more than the FLOP count), each kind of pass counted once (``each_kind``)."""
    optimizer: dict[tuple, int] = {}  # by model: the same for each of its batches

    def count(model: nn.Module, work: Work) -> tuple[float, float, int]:
        counter = Launches() if kernels else contextlib.nullcontext(None)
        with counter as launched:
            flops = scale = pass_flops(model, work, precision)
        launches = launched.n if kernels else 0
        if math.isnan(flops):
            with counter as launched:
                scale = pass_flops(model, dataclasses.replace(work, train=False), precision)
            launches = 3 * launched.n if kernels else 0
        if work.train and kernels:
            kind = signature(model)
            optimizer[kind] = optimizer[kind] if kind in optimizer else optimizer_launches(model)
            launches += optimizer[kind]
        return flops, scale, launches
    return each_kind(plan_, precision, train_only, count)


def timed(plan_: list[Runs], precision: Precision) -> list[tuple[Runs, Work, float]]:
    """Each run's work with the seconds one of its passes takes here, timed once per kind of pass (``each_kind``): a
    training step's forward, backward and optimizer step, or a forward pass — the second call of a short one (the
    first allocates, which is most of a call of a few milliseconds), the first of a long one."""
    def seconds_of(fn: Callable[[], None]) -> float:
        for _ in range(2):
            t0 = time.perf_counter()
            fn()
            seconds = time.perf_counter() - t0
            if seconds > 0.05:
                break
        return seconds

    def measure(model: nn.Module, work: Work) -> float:
        seconds = seconds_of(one_pass(model, work, on(work.batch(), precision.device), precision))
        if work.train:
            seconds += seconds_of(_optimizer_step(model))
            model.zero_grad(set_to_none=True)
        return seconds
    return each_kind(plan_, precision, False, measure)


def rough_flops(plan_: list[Runs], stop: float = math.inf) -> float:
    """Every pass of ``plan_`` at 6 FLOPs per parameter and token of a training step, 2 of a forward pass (Kaplan et
    al. 2020's rule: it leaves out attention's quadratic term and an ODE's repeated evaluations — 0.4–1.5× the counted
    FLOPs of the smoke plans), summed until it passes ``stop``: enough to tell a plan of tiny models from any other
    before counting a pass (the smoke plans come to 1e9–2e10 by it, the cpu plans to 6e12–4e14)."""
    total, parameters = 0.0, {}
    for runs in plan_:
        if id(runs.build) not in parameters:
            parameters[id(runs.build)] = sum(p.numel() for p in runs.build().parameters())
        for work in runs.work:
            first = work.batch()
            while isinstance(first, (tuple, list)):
                first = first[0]
            total += runs.count * work.n * (6 if work.train else 2) * parameters[id(runs.build)] * first.numel()
            if total > stop:
                return total
    return total


def signature(thing: Any) -> tuple:
    """What decides the work of a pass, not its values: of a model, each module's type and plain settings (its public
    attributes that are not tensors: widths, solver and steps, windows) and every parameter's and buffer's shape; of a
    batch, its tensors' shapes and types."""
    if isinstance(thing, torch.Tensor):
        return tuple(thing.shape), str(thing.dtype)
    if isinstance(thing, (tuple, list)):
        return tuple(signature(t) for t in thing)
    if not isinstance(thing, nn.Module):
        return (type(thing).__qualname__,)

    def setting(v: Any) -> str:
        return repr(v) if isinstance(v, (int, float, str, bool, type(None), tuple)) else (
            getattr(v, "__qualname__", None) or type(v).__qualname__)
    modules = tuple((name, type(m).__qualname__, tuple(sorted(
        (k, setting(v)) for k, v in vars(m).items() if not k.startswith("_") and k != "training"
        and not isinstance(v, torch.Tensor)))) for name, m in thing.named_modules())
    return modules, tuple((n, tuple(t.shape), str(t.dtype)) for n, t in (*thing.named_parameters(),
                                                                      *thing.named_buffers()))


def gpu_work(plan: list[Runs], precision: Precision) -> tuple[float, float]:
    """The FLOPs and kernel launches of every pass of ``plan`` (a training step torch cannot count at three times its
    forward pass's FLOPs), counted without a timed probe: what a GPU's estimate needs (``seconds``)."""
    raw = counted(plan, precision, train_only=False)
    flops = sum(r.count * w.n * (f if not math.isnan(f) else 3 * m) for r, w, (f, m, _) in raw)
    return flops, launches(raw)


def launches(raw: list) -> float:
    """Every kernel launch of ``counted``'s passes, each pass as often as its runs make it."""
    return float(sum(runs.count * work.n * n for runs, work, (*_, n) in raw))
