"""Study 01's pilot: on which configuration does the task need the replaced layer, and does each arm learn it?

For each candidate (the cpu profile's task and model with some keys overridden) it trains the named arms on one or
more seeds of MQAR, each arm at the candidate's ``lr``, and reports each run's test loss at the answers, its accuracy
and its seconds. A configuration where the baseline solves the task and the null arm does not can calibrate the
non-inferiority margin; the hybrid's row says whether it learned at that rate.

    python benchmarks/pilot_01.py --out params/cpu/01_gradient_flow.pilot.json \\
        '{"lr": 1e-3}' '{"lr": 3e-3, "arms": ["hybrid"]}' '{"lr": 1e-3, "n_layer": 6, "ode_layers": [2, 3]}'
    python benchmarks/pilot_01.py --table params/cpu/01_gradient_flow.pilot.json

Each positional argument is one candidate, a JSON object of parameter overrides on ``BASE`` (the cpu profile when the
pilot was made, kept here so the pilot reads the same whatever the profile becomes), plus optionally "arms" and
"seeds". The runs go side by side in one-thread workers, as the notebook's do on a CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from odebook.data import mqar
from odebook import studies
from odebook.study.experiment import run_seeds
from odebook.study.recall import mqar_task
from odebook.training.executor import Workers, usable_cores
from odebook.training.runtime import precision_for, resolve_device
from odebook.training.train import TrainConfig

arms01 = studies.load("01_gradient_flow").arms
GradientFlowParams = studies.schema("01_gradient_flow")


BASE = {"d_model": 64, "n_layer": 2, "ode_layers": [1], "mqar_keys": 16, "mqar_pairs": 4, "seq_len": 64,
        "max_seq_len": 64, "task_steps": 1000, "task_batch_size": 32, "eval_interval": 250, "eval_batches": 10,
        "tokenizer": "bytes"}


def pilot(candidate: dict) -> list[dict]:
    overrides = {k: v for k, v in candidate.items() if k not in ("arms", "seeds", "lr")}
    arms, seeds = candidate.get("arms", ["baseline", "hybrid", "null"]), candidate.get("seeds", 1)
    p = GradientFlowParams.from_mapping({**BASE, **overrides, "checkpoint_interval": 0}, source="pilot")
    precision = precision_for(resolve_device("cpu"))
    vocab = mqar.Vocab(p.mqar_keys)
    task = mqar_task(vocab=vocab, train_ks=[p.mqar_pairs], eval_ks=[p.mqar_pairs], batch_size=p.task_batch_size,
                     seq_len=p.seq_len, eval_batches=p.eval_batches, power_a=0.1, device=precision.device, test=True)
    config = dataclasses.replace(TrainConfig.from_params(p, steps=p.task_steps), lr=candidate["lr"])
    builders = arms01.gradient_flow_arms(p.model_config(vocab.size), arms)
    start = time.perf_counter()
    runs = run_seeds(builders, task, config, precision, seeds=range(seeds), progress=False,
                     executor=Workers(usable_cores()))
    wall = time.perf_counter() - start
    return [{"candidate": candidate, "arm": r.model, "seed": r.seed, "test_loss": r.test_loss,
             "accuracy": r.scores[f"k={p.mqar_pairs}"], "seconds": r.train_seconds, "wall_seconds": wall,
             "eval": list(zip(r.history.eval_step, r.history.eval_loss)),
             "alpha": [a[i] for a in r.history.scalars.values() for i in range(0, len(a), max(1, len(a) // 8))]
             + [a[-1] for a in r.history.scalars.values()]}
            for r in runs]


SHORT = {"alpha_init": "α", "task_steps": "steps"}  # overrides as the table names them


def table(results: list[dict]) -> str:
    """The pilot's runs as the Markdown table the notebook shows (test loss at the answers, seconds of one thread)."""
    rows = ["| overrides of the cpu profile | arm | seed | test loss | accuracy | validation loss by quarter "
            "| α by quarter | s |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        what = ", ".join(f"{SHORT.get(k, k)} {v}" for k, v in r["candidate"].items()
                         if k not in ("arms", "seeds"))
        evals = r.get("eval", [])
        quarters = " ".join(f"{loss:.2f}" for step, loss in evals if step % max(1, evals[-1][0] // 4) == 0)
        alpha = " ".join(f"{a:.2f}" for a in r.get("alpha", [])[::2]) or "—"  # at 0, ¼, ½, ¾ and the end
        rows.append(f"| {what} | {r['arm']} | {r['seed']} | {r['test_loss']:.3f} | {r['accuracy']:.2f} | "
                    f"{quarters or '—'} | {alpha} | {r['seconds']:.0f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="*", help="JSON objects of overrides on the cpu profile, with 'lr'")
    ap.add_argument("--table", type=Path, help="print this results file as a Markdown table and stop")
    ap.add_argument("--out", type=Path, help="append each candidate's runs to this JSON file")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    for text in args.candidates:
        result = pilot(json.loads(text))
        print(table(result), flush=True)
        if args.out:
            done = json.loads(args.out.read_text()) if args.out.is_file() else []
            args.out.write_text(json.dumps(done + result, indent=1) + "\n")


if __name__ == "__main__":
    main()
