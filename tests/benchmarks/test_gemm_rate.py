"""The GEMM-rate defence's clock and peak on both vendors' cores (benchmarks/gemm_rate.py)."""

import platform
import shutil

import pytest

from benchmarks.gemm_rate import CLOCK_RANGE_HZ, core_clock_hz, peak_flop_per_cycle, plausible_clock

# flags of /proc/cpuinfo on machines this book has run on (abridged to the vector units)
ZEN4 = {"sse", "avx", "avx2", "fma", "avx512f", "avx512_bf16"}  # AMD EPYC, family 25 model 17
ZEN3 = {"sse", "avx", "avx2", "fma"}  # AMD EPYC, family 25 model 1
SAPPHIRE_RAPIDS = {"sse", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}
HASWELL = {"sse", "avx", "avx2", "fma"}
SANDY_BRIDGE = {"sse", "avx"}


@pytest.mark.parametrize("vendor, family, flags, peak", [
    ("AuthenticAMD", 25, ZEN4, 32),  # AVX-512 on 256-bit pipes: the family's table, not the flags, decides
    ("AuthenticAMD", 25, ZEN3, 32),
    ("AuthenticAMD", 26, ZEN4, 64),  # Zen 5: full 512-bit FMA pipes
    ("GenuineIntel", 6, SAPPHIRE_RAPIDS, 64),  # AMX does not raise an fp32 bound
    ("GenuineIntel", 6, HASWELL, 32),
    ("GenuineIntel", 6, SANDY_BRIDGE, 16),
    ("GenuineIntel", 6, {"sse"}, 8),
])
def test_the_peak_comes_from_the_family_on_known_amd_cores_and_from_the_vector_units_elsewhere(vendor, family, flags,
                                                                                               peak):
    flop, source = peak_flop_per_cycle(vendor, family, flags)
    assert flop == peak and source
    assert ("AMX" in source) == ("amx_tile" in flags)


def test_a_clock_outside_what_x86_cores_run_at_is_implausible():
    # 12.6 GHz is what a chain of dependent `add $1` read on a Sapphire Rapids Xeon (its renamer folds immediate adds)
    assert not plausible_clock(12.61e9) and not plausible_clock(0.1e9) and not plausible_clock(None)
    assert plausible_clock(2.9e9) and plausible_clock(CLOCK_RANGE_HZ[0]) and plausible_clock(CLOCK_RANGE_HZ[1])


@pytest.mark.skipif(shutil.which("cc") is None or platform.machine() not in ("x86_64", "AMD64"),
                    reason="the clock chain is x86 assembly compiled with cc")
def test_the_multiply_chain_reads_a_plausible_clock_that_the_register_add_chain_confirms():
    # both chains are one dependency each (imul 3 cycles, register add 1, on Intel and AMD): on any x86 core here
    # they agree, where the immediate-add chain they replace read 10-13 GHz on Intel Xeons of family 6
    mul, add = core_clock_hz()
    assert plausible_clock(mul), mul
    assert abs(mul / add - 1) < 0.2, (mul, add)
