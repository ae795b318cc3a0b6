"""fla-core's ``chunk_gated_delta_rule`` — forward, final state and the full gated backward (dq, dk, dv, dg, dβ,
dh0) — run on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``, in its own process: tests/nn/
fla_interpreted.py) and held to odebook's step-by-step reference at B 2, T 100, H 2, K = V = 64 with an initial state;
also variable-length input (``cu_seqlens``), the kernel's own q/k L2 norm, and the last tile configuration of every
autotuned kernel instead of the first. Measure: RMS(error) / RMS(reference), fla-core's own.

Bounds. fp32: 1e-5 (measured 2e-7 – 8e-7; one exponent of the backward scaled by 1.01 gives 8e-4 – 3e-3, which
``test_a_seeded_error_in_the_gated_backward_fails_the_check`` shows is caught — the CUDA test's 0.5 % / 2 % would
not catch it). fp16 (q, k, v, β in fp16, the gate and h0 in fp32 as fla-core takes them): 2e-3, four times fp16's
unit roundoff 2⁻¹¹ ≈ 4.9e-4, since inputs and stored outputs are rounded once each (measured 6e-5 – 5e-4). bf16 is
not run: the interpreter does arithmetic on bf16's raw bits.

What this does not prove: that the compiled kernel is right on a given GPU (compiler bugs such as fla-core's Hopper
backward issue #640 live below the interpreter), TF32 dot products and fast-exp numerics, bf16, speed, memory.
tests/nn/test_delta_rule.py holds the compiled kernel on CUDA to looser bounds where a GPU is present.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("triton") is None or importlib.util.find_spec("fla") is None,
                                 reason="needs triton and fla-core (pip install -e '.[gpu-check]')")]

WORKER = Path(__file__).with_name("fla_interpreted.py")
BOUNDS = {"fp32": 1e-5, "fp16": 2e-3, "varlen": 1e-5, "l2norm": 1e-5}
FORWARD, BACKWARD = ("o", "state"), ("dq", "dk", "dv", "dg", "dbeta", "dh0")


def interpreted(*args: str) -> dict:
    """The worker's JSON for ``args`` (it sets TRITON_INTERPRET itself, in its own process)."""
    done = subprocess.run([sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{WORKER.name} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def first_tiles() -> dict:
    return interpreted(*BOUNDS)


@pytest.mark.parametrize("case", BOUNDS)
def test_fla_core_matches_the_reference_under_the_interpreter(first_tiles, case):
    errors = first_tiles["errors"][case]
    assert set(errors) == set(FORWARD + BACKWARD)
    assert all(e < BOUNDS[case] for e in errors.values()), errors


def test_another_tile_configuration_matches_too():
    """The last configuration of every autotuned kernel (the check above takes the first), fp32."""
    run = interpreted("fp32", "--tiles", "last")
    tuned = {name: chosen for name, (n, chosen) in run["tiles"].items() if n > 1}
    assert "chunk_bwd_kernel_dqkwg" in tuned and all(chosen > 0 for chosen in tuned.values()), run["tiles"]
    assert all(e < BOUNDS["fp32"] for e in run["errors"]["fp32"].values()), run["errors"]


def test_a_seeded_error_in_the_gated_backward_fails_the_check():
    """The decay e^{G_t − G_i} inside a chunk, in the kernel that computes dq, dk and dg, scaled by 1.01: the forward
    still passes, and the fp32 bound fails on the gradients that kernel computes."""
    errors = interpreted("fp32", "--seed-error")["errors"]["fp32"]
    assert all(errors[n] < BOUNDS["fp32"] for n in FORWARD + ("dv", "dbeta", "dh0")), errors
    assert all(errors[n] > 10 * BOUNDS["fp32"] for n in ("dq", "dk", "dg")), errors
