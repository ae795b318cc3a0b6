"""Generation with and without the KV cache (study 05): the time of greedy generation cached against recomputed, the
speed-up and whether both give the same tokens; the generated length at which the speed-up passes a target (the
crossover, interpolated on the log–log curve) and the claim on it; and sampled continuations of a prompt.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from odebook.models.lm import LM, generate
from odebook.study.stats import Verdict
from odebook.training.runtime import synchronize

__all__ = ["generation_speed", "speed_table", "Crossover", "crossover", "crossovers", "kv_verdict", "samples"]


def generation_speed(model: LM, prompt: torch.Tensor, n_new: int) -> dict:
    """Greedy generation of ``n_new`` tokens after ``prompt`` [B, T], with the KV cache and by recomputation:
    seconds of each (after a warm-up of a few tokens), the speed-up, and whether the tokens are identical."""
    out, seconds = {}, {}
    for cache in (True, False):
        generate(model, prompt, 4, temperature=0, cache=cache)  # warm-up: first-call allocations and caches
        synchronize(prompt.device)
        t0 = time.perf_counter()
        out[cache] = generate(model, prompt, n_new, temperature=0, cache=cache)
        synchronize(prompt.device)
        seconds[cache] = time.perf_counter() - t0
    return {"new_tokens": n_new, "cached_s": seconds[True], "recomputed_s": seconds[False],
            "speedup": seconds[False] / seconds[True], "identical_tokens": bool(torch.equal(out[True], out[False]))}




@dataclass(frozen=True)
class Crossover:
    """Where a speed-up curve first reaches ``target``: ``length`` interpolated on the log–log curve between the two
    measured lengths around it (the first length itself when the curve starts at or above the target, ``below``),
    or None when it is not reached up to ``longest``."""

    length: float | None
    target: float
    longest: int
    below: bool = False

    @property
    def reached(self) -> bool:
        return self.length is not None

    def __str__(self) -> str:
        if not self.reached:
            return f"{self.target:g}× not reached up to {self.longest} tokens"
        return f"{self.target:g}× {'at or below' if self.below else 'from'} {self.length:.0f} tokens"


def crossover(lengths: Sequence[int], speedups: Sequence[float], target: float) -> Crossover:
    """The generated length at which ``speedups`` (measured at increasing ``lengths``) first pass ``target``:
    linear interpolation of log speed-up against log length between the last length below the target and the
    first at or above it."""
    if len(lengths) != len(speedups) or not lengths:
        raise ValueError(f"need one speed-up per length, got {len(lengths)} lengths and {len(speedups)} speed-ups")
    if list(lengths) != sorted(set(lengths)) or min(lengths) <= 0 or min(speedups) <= 0 or target <= 0:
        raise ValueError(f"lengths must increase and lengths, speed-ups and target be positive, got {list(lengths)}, "
                         f"{list(speedups)}, {target}")
    longest = max(lengths)
    if speedups[0] >= target:
        return Crossover(float(lengths[0]), target, longest, below=True)
    for (n0, s0), (n1, s1) in zip(zip(lengths, speedups), zip(lengths[1:], speedups[1:])):
        if s0 < target <= s1:
            f = (math.log(target) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return Crossover(math.exp(math.log(n0) + f * (math.log(n1) - math.log(n0))), target, longest)
    return Crossover(None, target, longest)


def speed_table(models: Mapping[str, LM], prompt: torch.Tensor, lengths: Sequence[int]) -> pd.DataFrame:
    """``generation_speed`` of each model at each generated length, one row each."""
    return pd.DataFrame([{"model": name, **generation_speed(model, prompt, n)} for name, model in models.items()
                         for n in lengths])


def crossovers(speed: pd.DataFrame, target: float) -> dict[str, Crossover]:
    """Each model's ``crossover`` of ``target`` on its rows of ``speed_table``."""
    return {name: crossover(rows.new_tokens.tolist(), rows.speedup.tolist(), target)
            for name, rows in speed.groupby("model", sort=False)}


def kv_verdict(speed: pd.DataFrame, crossings: Mapping[str, Crossover], *, target: float, limit: int,
               scale: str) -> Verdict:
    """KV caching passes ``target``× by ``limit`` generated tokens: held when every model's crossover lies at or
    below ``limit`` and cached and recomputed generation gave identical tokens; a single measurement per length."""
    identical = bool(speed.identical_tokens.all())
    passed = all(c.reached and c.length <= limit for c in crossings.values())
    return Verdict(
        f"KV caching passes {target:g}× by {limit} generated tokens", "held" if passed and identical else "not held",
        "; ".join(f"{name}: {c} ({', '.join(f'{r.new_tokens}: {r.speedup:.1f}×' for r in rows.itertuples())})"
                  for (name, c), (_, rows) in zip(crossings.items(), speed.groupby("model", sort=False)))
        + ("; cached and recomputed tokens identical" if identical else " — cached and recomputed tokens differ"),
        scale, f"crossover at or below {limit} tokens, single measurement", "outside the loss families")


def samples(models: Mapping[str, LM], starts: torch.Tensor, tok, *, tokens: int, temperature: float, top_k: int,
            seed: int) -> list[dict]:
    """Each model's sampled continuation of each prompt in ``starts`` [n, T] (prompt i from generator ``seed + i``,
    the same for every model), decoded with ``tok``."""
    out = []
    for i, start in enumerate(starts):
        for name, model in models.items():
            device = next(model.parameters()).device
            ids = generate(model, start[None].to(device), tokens, temperature=temperature, top_k=top_k,
                           generator=torch.Generator(device).manual_seed(seed + i))
            out.append({"prompt": i, "model": name, "prompt text": tok.decode(start.tolist()),
                        "continuation": tok.decode(ids[0, len(start):].tolist())})
    return out
