"""Study 01's calibration pilot: which cpu configuration makes removing the replaced layers cost something?

For each candidate configuration (the cpu profile with some keys overridden) it trains the baseline and the null arm
(the baseline without the layers the hybrid replaces) on the same seeds and batch streams, and reports the paired gap
in test loss, null − baseline: its mean, its seed SD and their ratio, with the seconds each arm took. A configuration
where the gap exceeds about three seed SDs can calibrate a non-inferiority margin; one where it does not cannot.

    python benchmarks/pilot_01.py --seeds 3 --out params/cpu/01_gradient_flow.pilot.json \\
        '{"lr": 3e-3}' '{"lr": 3e-3, "ode_layers": [1, 2, 3, 4]}'
    python benchmarks/pilot_01.py --table params/cpu/01_gradient_flow.pilot.json

Each positional argument is one candidate, a JSON object of parameter overrides on ``BASE``, the cpu profile the
pilot started from (kept here, so that the pilot reads the same whatever the profile has become since).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from odebook.data import corpus as data
from odebook.models.arms import gradient_flow_arms
from odebook.params import GradientFlowParams
from odebook.study.experiment import run_seeds
from odebook.study.task import lm_task
from odebook.training.runtime import precision_for, resolve_device
from odebook.training.train import TrainConfig

BASE = {"tokenizer": "bytes", "d_model": 128, "n_layer": 6, "ode_layers": [2, 3], "seq_len": 64, "max_seq_len": 64,
        "batch_size": 32, "steps": 250, "lr": 1e-3, "eval_interval": 50, "eval_batches": 10}


def pilot(overrides: dict, seeds: int, arms=("baseline", "null")) -> dict:
    p = GradientFlowParams.from_mapping({**BASE, **overrides, "n_seeds": seeds, "checkpoint_interval": 0},
                                        source="pilot")
    precision = precision_for(resolve_device("cpu"))
    splits = data.tokenize(data.load_corpus(p.corpus, **p.corpus_files()), data.get_tokenizer(p.tokenizer))
    task = lm_task(splits, batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches)
    builders = gradient_flow_arms(p.model_config(splits.vocab_size), arms)
    start = time.perf_counter()
    runs = run_seeds(builders, task, TrainConfig.from_params(p), precision, seeds=range(seeds), progress=False)
    loss = {a: [r.test_loss for r in runs if r.model == a] for a in arms}
    gap = [n - b for n, b in zip(loss["null"], loss["baseline"])]
    sd = statistics.stdev(gap)
    return {"overrides": overrides, "seeds": seeds, "test_loss": loss, "gap": gap,
            "gap_mean": statistics.mean(gap), "gap_sd": sd, "gap_over_sd": statistics.mean(gap) / sd,
            "seconds": {a: sum(r.train_seconds for r in runs if r.model == a) / seeds for a in arms},
            "wall_seconds": time.perf_counter() - start}


def table(results: list[dict]) -> str:
    """The pilot's results as the Markdown table the notebook shows."""
    rows = ["| overrides of the cpu profile | seeds | null − baseline (nats) | seed SD | gap / SD | s per seed: baseline, null |",
            "|---|---|---|---|---|---|"]
    for r in results:
        what = ", ".join(f"{k} {v}" for k, v in r["overrides"].items()) or "none (the old cpu profile)"
        rows.append(f"| {what} | {r['seeds']} | {r['gap_mean']:+.3f} | {r['gap_sd']:.3f} | {r['gap_over_sd']:+.1f} | "
                    f"{r['seconds']['baseline']:.0f}, {r['seconds']['null']:.0f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="*", help="JSON objects of overrides on the cpu profile")
    ap.add_argument("--table", type=Path, help="print this results file as a Markdown table and stop")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="append each candidate's result to this JSON file")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    for text in args.candidates:
        result = pilot(json.loads(text), args.seeds)
        print(json.dumps({k: v for k, v in result.items() if k not in ("test_loss",)}), flush=True)
        if args.out:
            done = json.loads(args.out.read_text()) if args.out.is_file() else []
            args.out.write_text(json.dumps(done + [result], indent=1) + "\n")


if __name__ == "__main__":
    main()
