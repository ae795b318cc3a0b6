"""Is the quoted GEMM rate possible on these cores? The rate measured against what the cores can do (``make bench``).

Every MFU figure rests on a measured fp32 GEMM rate, so that rate needs a defence independent of wall clocks on a
shared machine. Three measurements, each on the calling thread's own CPU clock (``time.thread_time``), so time the
thread spends descheduled by other processes does not count:

1. the core clock: a chain of dependent integer adds, one cycle each on every x86 core since the 1990s, compiled
   from the C below with the system's ``cc`` (skipped where there is none);
2. one-thread fp32 GEMMs (torch's own path and oneDNN's inner product, which ``odebook.nn.gemm`` calls): FLOPs per
   CPU-second, divided by the clock, is FLOP per cycle — a figure the core's design bounds (``PEAK_FLOP_PER_CYCLE``);
3. the two-thread wall-clock rate that the MFU reference uses, beside the peak of all cores at the measured clock.

A rate above the peak means the FLOP count or the timing is wrong, or the machine is not the one named.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.timing import median_time
from odebook.nn import gemm

__all__ = ["PEAK_FLOP_PER_CYCLE", "cpu_model", "core_clock_hz", "flop_per_cycle", "matmul_flops", "onednn_matmul_flops",
           "reference_flops", "main"]

# fp32 FLOP per cycle per core of AMD's server cores, by (cpu family, first model of the generation): Zen 2 and 3 have
# two 256-bit FMA pipes (2 × 8 lanes × 2 FLOP = 32); Zen 4 runs AVX-512 on those same 256-bit pipes (still 32); Zen 5
# has full 512-bit FMA pipes (64). AMD's software optimisation guides for families 17h, 19h and 1Ah.
PEAK_FLOP_PER_CYCLE = {("AuthenticAMD", 23): 32, ("AuthenticAMD", 25): 32, ("AuthenticAMD", 26): 64}

_CHAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
    uint64_t n = 200000000ULL, x = 0;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cpu();
        for (uint64_t i = 0; i < n; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
        double hz = 4.0 * n / (cpu() - t0);
        if (hz > best) best = hz;
    }
    printf("%.6e\n", best);
    return 0;
}
"""


def cpu_model() -> tuple[str, int, int, str]:
    """(vendor, cpu family, model, model name) from /proc/cpuinfo; ("", 0, 0, "") where it cannot be read."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "", 0, 0, ""
    return (fields.get("vendor_id", ""), int(fields.get("cpu family", 0) or 0), int(fields.get("model", 0) or 0),
            fields.get("model name", ""))


def core_clock_hz() -> float | None:
    """The core's clock in Hz from a dependent-add chain on the thread's CPU clock (best of 5); None without ``cc``."""
    with tempfile.TemporaryDirectory(prefix="odebook-clock-") as tmp:
        source, binary = Path(tmp) / "chain.c", Path(tmp) / "chain"
        source.write_text(_CHAIN)
        try:
            subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True, capture_output=True)
            return float(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout)
        except (OSError, subprocess.CalledProcessError):
            return None


def _thread_rate(fn, flops: float, repeats: int) -> float:
    """FLOP per CPU-second of ``fn`` on this thread's CPU clock (after two warm-up calls)."""
    fn(), fn()
    t0 = time.thread_time()
    for _ in range(repeats):
        fn()
    return flops * repeats / (time.thread_time() - t0)


@torch.no_grad()
def flop_per_cycle(clock_hz: float, n: int = 1024, repeats: int = 20) -> dict[str, float]:
    """FLOP per cycle of one-thread n×n fp32 products: torch's path and, where available, oneDNN's."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        paths = {"torch.mm": lambda: torch.mm(a, b)}
        if gemm.onednn_available():
            paths["oneDNN (odebook.nn.gemm)"] = lambda: gemm.mm(a, b)
        return {name: _thread_rate(fn, 2 * n**3, repeats) / clock_hz for name, fn in paths.items()}
    finally:
        torch.set_num_threads(threads)


def matmul_flops(n: int = 2048, repeats: int = 10) -> float:
    """FLOP/s of an n×n fp32 matmul through torch's own path, the one the models' matmuls take (median of
    ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / median_time(lambda: a @ b, repeats)


@torch.no_grad()
def onednn_matmul_flops(n: int = 2048, repeats: int = 10) -> float | None:
    """FLOP/s of the same product through oneDNN's fp32 inner product, the kernel odebook.nn.gemm calls (ordinary
    tensors in and out), or None without oneDNN."""
    if not gemm.onednn_available():
        return None
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / median_time(lambda: gemm.mm(a, b), repeats)


def reference_flops() -> float:
    """The MFU reference: the faster of the two rates above, measured now (oneDNN's also where the step runs on
    torch's GEMM)."""
    with gemm.backend("onednn"):
        return max(matmul_flops(), onednn_matmul_flops() or 0.0)


def main() -> None:
    vendor, family, model, name = cpu_model()
    peak = PEAK_FLOP_PER_CYCLE.get((vendor, family))
    print(f"\nGEMM rate against the cores: {name or 'unknown CPU'} ({vendor} family {family}, model {model}), "
          f"{os.cpu_count()} logical CPUs, torch {torch.get_num_threads()} threads")
    clock = core_clock_hz()
    if clock is None:
        print("  core clock not measured (no C compiler 'cc'): FLOP per cycle cannot be computed here")
        return
    print(f"  core clock (dependent-add chain, thread CPU time): {clock / 1e9:.2f} GHz")
    for path, fpc in flop_per_cycle(clock).items():
        bound = f" of the core's {peak} ({fpc / peak:.0%})" if peak else " (peak of this core unknown)"
        print(f"  one thread, {path}: {fpc:.1f} FLOP/cycle{bound}")
    if peak:
        cores = torch.get_num_threads()
        print(f"  so {cores} cores at {clock / 1e9:.2f} GHz cannot exceed {cores * peak * clock / 1e9:.0f} GFLOP/s fp32; "
              "a measured rate above that is a counting or timing error, or another machine")


if __name__ == "__main__":
    main()
