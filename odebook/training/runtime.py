"""The runtime a study runs on: the device and its name, the precision policy (fp32 on CPU with denormals flushed,
bf16 autocast where the GPU has native bf16, fp16 autocast with a GradScaler elsewhere — a T4, compute capability
7.5, has no bf16; ``ODEBOOK_GPU_POLICY=t4`` takes a T4's policy on any GPU: fp16 autocast with a GradScaler, no TF32),
seeding, device synchronisation for timings, and the CPU allocator settings."""

from __future__ import annotations

import contextlib
import os
import platform
import random
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Precision", "resolve_device", "precision_for", "GPU_POLICY", "seed_everything", "synchronize",
           "device_name", "torch_build", "ALLOCATOR_ENV"]

# glibc serves large allocations (a 2048 × 50,304 fp32 logit matrix is 412 MB) with fresh mmap'd pages and returns
# them on free, so every training step page-faults its big tensors in again. Keeping freed memory in the heap makes
# the 01 baseline's CPU step faster (make bench prints the tuned against the default allocator). glibc reads these
# variables at process start, so they are set for child processes: the runner's kernels, make lab, the benchmark's
# workers.
ALLOCATOR_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(64 * 2**30)}

# A T4's policy on a larger GPU (what a Colab user gets, emulated on an H100): ODEBOOK_GPU_POLICY=t4. Empty or unset:
# the GPU's own policy (bf16 where it is native).
GPU_POLICY = "ODEBOOK_GPU_POLICY"
GPU_POLICIES = ("", "t4")


@dataclass(frozen=True)
class Precision:
    device: torch.device
    dtype: torch.dtype | None  # autocast dtype; None = plain fp32

    @property
    def uses_scaler(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def scaler(self) -> torch.amp.GradScaler:
        return torch.amp.GradScaler(self.device.type, enabled=self.uses_scaler)

    def __str__(self) -> str:
        name = {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast + GradScaler"}
        return f"{name[self.dtype]} on {device_name(self.device)}"


def resolve_device(choice: str = "auto") -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but torch sees no CUDA device; use 'auto' or 'cpu'")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def precision_for(device: torch.device) -> Precision:
    """The policy for ``device``. On CPU it also flushes denormals, which otherwise slow small-weight matmuls."""
    if device.type == "cpu":
        torch.set_flush_denormal(True)
        return Precision(device, None)
    if device.type == "cuda":
        policy = os.environ.get(GPU_POLICY, "")
        if policy not in GPU_POLICIES:
            raise ValueError(f"{GPU_POLICY}={policy!r}: unknown; use 't4' (fp16 autocast + GradScaler, no TF32) or "
                             "leave it unset (the GPU's own policy)")
        if policy == "t4":  # a T4 has no bf16 and no TF32: fp16 autocast, fp32 matmuls stay fp32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            return Precision(device, torch.float16)
        # is_bf16_supported() can report emulated bf16 on pre-Ampere cards; ask for native support (sm >= 8.0).
        native_bf16 = torch.cuda.get_device_capability(device) >= (8, 0)
        return Precision(device, torch.bfloat16 if native_bf16 else torch.float16)
    return Precision(device, None)


def seed_everything(seed: int, device: torch.device | None = None) -> None:
    """Seed Python, numpy and torch's CPU generator, and every GPU's — or, with ``device``, that GPU's alone (runs
    spread over several GPUs must not reseed each other's generators; odebook.training.spread)."""
    random.seed(seed)
    np.random.seed(seed)
    if device is None:
        torch.manual_seed(seed)
        return
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(seed)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    """The device in words, as reports and manifests name it."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    cpu = platform.processor() or platform.machine()
    return f"cpu ({cpu}, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads)"


def torch_build() -> str:
    """Which torch build is installed, in one line (``make setup`` prints it): the CPU-only wheels or a CUDA build,
    which also runs on a CPU but brings several GB of nvidia-* packages."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__}: the CPU-only build"
    return (f"torch {torch.__version__}: a CUDA {torch.version.cuda} build (it runs on a CPU too; for the CPU-only "
            "wheels: make setup TORCH_BUILD=cpu)")
