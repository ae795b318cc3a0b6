"""Generation with and without the KV cache (study 05): the time of greedy generation cached against recomputed, the
speed-up and whether both give the same tokens; the generated length at which the speed-up passes a target (the
crossover, interpolated on the log–log curve) and the claim on it; and sampled continuations of a prompt. The
measurements themselves (``generation_speed``, ``crossover``) are this study's measure module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch

from odebook.models.lm import LM, generate
from .measure import Crossover, crossover, generation_speed
from odebook.study.stats import Verdict

__all__ = ["speed_table", "crossovers", "kv_verdict", "samples"]


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
