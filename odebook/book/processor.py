"""Which processor a notebook ran on: its model and the vector instructions its kernels could use.

Two CPUs of one name round differently when they give oneDNN and torch different instruction sets (an AMD EPYC
Zen 3 has AVX2, a Zen 4 also AVX-512): the same code and seeds then give other last digits, and a seed near a
learning threshold may land on the other side. The manifest records it, and a run on another processor is not
"unchanged" (odebook.book.rerun). ``torch.device``'s name says only "cpu".
"""

from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["VECTOR_FLAGS", "describe"]

VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")  # those that change which kernels run


def describe(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """E.g. 'AMD EPYC (family 25, model 1; avx2 fma)': the model name, family and model, and which of
    ``VECTOR_FLAGS`` it has; ``platform.processor()`` where there is no /proc/cpuinfo."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return platform.processor() or platform.machine()
    first = text.split("\n\n", 1)[0]
    fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in first.splitlines()) if _)
    flags = set(fields.get("flags", "").split())
    vector = " ".join(f for f in VECTOR_FLAGS if f in flags) or "no AVX2"
    return (f"{fields.get('model name', platform.machine())} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}; {vector})")
