"""Is the quoted GEMM rate possible on these cores? The rate measured against what the cores can do (``make bench``).

Every MFU figure rests on a measured fp32 GEMM rate, so that rate needs a defence independent of wall clocks on a
shared machine. Three measurements, each on the calling thread's own CPU clock (``time.thread_time``), so time the
thread spends descheduled by other processes does not count:

1. the core clock: a chain of dependent 64-bit multiplies (``imul``, 3 cycles each on every Intel core since Core 2
   and every AMD core since Zen 1: Agner Fog's instruction tables), compiled from the C below with the system's ``cc``
   (skipped where there is none). A chain of dependent ``add $1`` is *not* a clock on Intel since Golden Cove, whose
   renamer folds immediate adds several to a cycle (it read 12.6 GHz on a Sapphire Rapids Xeon); a chain of register
   adds is printed beside the multiplies as a cross-check, and a clock outside 0.5–6.5 GHz is reported as implausible;
2. one-thread fp32 GEMMs (torch's own path and oneDNN's inner product, which ``odebook.nn.gemm`` calls): FLOPs per
   CPU-second, divided by the clock, is FLOP per cycle — which the core's vector units bound (``peak_flop_per_cycle``);
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

__all__ = ["PEAK_FLOP_PER_CYCLE", "CLOCK_RANGE_HZ", "peak_flop_per_cycle", "plausible_clock", "cpu_model", "cpu_flags",
           "core_clock_hz", "flop_per_cycle", "matmul_flops", "onednn_matmul_flops", "reference_flops", "main"]

# fp32 FLOP per cycle per core of AMD's server cores, by (cpu family, first model of the generation): Zen 2 and 3 have
# two 256-bit FMA pipes (2 × 8 lanes × 2 FLOP = 32); Zen 4 runs AVX-512 on those same 256-bit pipes (still 32); Zen 5
# has full 512-bit FMA pipes (64). AMD's software optimisation guides for families 17h, 19h and 1Ah.
PEAK_FLOP_PER_CYCLE = {("AuthenticAMD", 23): 32, ("AuthenticAMD", 25): 32, ("AuthenticAMD", 26): 64}
# Elsewhere the bound comes from the widest vector unit the flags name, at two FMA ports (the most any x86 core has):
# AVX-512 2 × 16 lanes × 2 FLOP = 64, AVX2 with FMA 2 × 8 × 2 = 32, AVX without FMA one 8-lane add and one multiply
# (16), SSE 8. AMX multiplies bf16 and int8 tiles, not fp32: it does not raise an fp32 GEMM's bound.
_BY_FLAGS = (({"avx512f"}, 64, "AVX-512, two FMA ports at most"), ({"avx2", "fma"}, 32, "AVX2 with FMA, two ports"),
             ({"avx"}, 16, "AVX without FMA"), (set(), 8, "SSE"))
CLOCK_RANGE_HZ = (0.5e9, 6.5e9)  # no x86 core of the last two decades runs outside it

_CHAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double cpu(void) {
    struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(void) {
    uint64_t n = 50000000ULL, x = 1, y = 1, one = 1;
    double mul = 0, add = 0;
    for (int rep = 0; rep < 5; rep++) {  /* the best of five: the clock, free of interruptions */
        double t0 = cpu();
        for (uint64_t i = 0; i < n; i++)  /* 4 dependent imul, 3 cycles each */
            __asm__ volatile("imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0" : "+r"(x) : "r"(one));
        double hz = 12.0 * n / (cpu() - t0);
        if (hz > mul) mul = hz;
        t0 = cpu();
        for (uint64_t i = 0; i < n; i++)  /* 4 dependent register adds, 1 cycle each */
            __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0" : "+r"(y) : "r"(one));
        hz = 4.0 * n / (cpu() - t0);
        if (hz > add) add = hz;
    }
    printf("%.6e %.6e\n", mul, add);
    return 0;
}
"""


def peak_flop_per_cycle(vendor: str, family: int, flags: set[str]) -> tuple[int, str]:
    """The fp32 FLOP per cycle one core cannot exceed, and where the bound comes from: AMD's known server cores by
    family, any other x86 core by the vector units its /proc/cpuinfo flags name."""
    if (vendor, family) in PEAK_FLOP_PER_CYCLE:
        return PEAK_FLOP_PER_CYCLE[vendor, family], f"{vendor} family {family} (AMD's optimisation guide)"
    flop, why = next((flop, why) for need, flop, why in _BY_FLAGS if need <= flags)
    return flop, f"{why}{' (AMX does not count for fp32)' if 'amx_tile' in flags else ''}, from the CPU flags"


def plausible_clock(hz: float | None) -> bool:
    """A measured core clock an x86 core can run at (``CLOCK_RANGE_HZ``)."""
    return hz is not None and CLOCK_RANGE_HZ[0] <= hz <= CLOCK_RANGE_HZ[1]


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


def cpu_flags() -> set[str]:
    """The flags of /proc/cpuinfo's first processor (empty where it cannot be read)."""
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    return set(line.partition(":")[2].split())


def core_clock_hz() -> tuple[float, float] | None:
    """The core's clock in Hz from the dependent-multiply chain, and from the register-add chain beside it, on the
    thread's CPU clock (best of 5 each); None without ``cc`` or off x86."""
    with tempfile.TemporaryDirectory(prefix="odebook-clock-") as tmp:
        source, binary = Path(tmp) / "chain.c", Path(tmp) / "chain"
        source.write_text(_CHAIN)
        try:
            subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True, capture_output=True)
            mul, add = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()
            return float(mul), float(add)
        except (OSError, subprocess.CalledProcessError, ValueError):
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
    peak, source = peak_flop_per_cycle(vendor, family, cpu_flags())
    print(f"\nGEMM rate against the cores: {name or 'unknown CPU'} ({vendor} family {family}, model {model}), "
          f"{os.cpu_count()} logical CPUs, torch {torch.get_num_threads()} threads")
    print(f"  peak: {peak} fp32 FLOP per cycle per core ({source})")
    measured = core_clock_hz()
    if measured is None:
        print("  core clock not measured (no C compiler 'cc', or not x86): FLOP per cycle cannot be computed here")
        return
    clock, adds = measured
    print(f"  core clock (dependent-multiply chain, thread CPU time): {clock / 1e9:.2f} GHz; register-add chain "
          f"{adds / 1e9:.2f} GHz")
    if not plausible_clock(clock):
        print(f"  that clock lies outside {CLOCK_RANGE_HZ[0] / 1e9:g}–{CLOCK_RANGE_HZ[1] / 1e9:g} GHz: implausible, so "
              "no FLOP per cycle is printed")
        return
    for path, fpc in flop_per_cycle(clock).items():
        print(f"  one thread, {path}: {fpc:.1f} FLOP/cycle of the core's {peak} ({fpc / peak:.0%})")
    cores = torch.get_num_threads()
    print(f"  so {cores} cores at {clock / 1e9:.2f} GHz cannot exceed {cores * peak * clock / 1e9:.0f} GFLOP/s fp32; "
          "a measured rate above that is a counting or timing error, or another machine")


if __name__ == "__main__":
    main()
