"""Study 01's calibration pilot: which cpu configuration makes removing the replaced layers cost something?

For each candidate configuration (the cpu profile with some keys overridden) it trains the baseline and the null arm
(the baseline without the layers the hybrid replaces) on the same seeds and batch streams, and reports the paired gap
in test loss, null − baseline: its mean, its seed SD and their ratio, with the seconds each arm took. A configuration
where the gap exceeds about three seed SDs can calibrate a non-inferiority margin; one where it does not cannot.

    python benchmarks/pilot_01.py --seeds 3 --out params/cpu/01_gradient_flow.pilot.json \\
        '{}' '{"ode_layers": [1, 2, 3, 4]}' '{"lr": 3e-3}'

Each positional argument is one candidate, a JSON object of parameter overrides on params/cpu/01_gradient_flow.yaml.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import yaml

from odebook.data import corpus as data
from odebook.models.arms import gradient_flow_arms
from odebook.params import GradientFlowParams
from odebook.study.experiment import run_seeds
from odebook.study.task import lm_task
from odebook.training.runtime import precision_for, resolve_device
from odebook.training.train import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def pilot(overrides: dict, seeds: int, arms=("baseline", "null")) -> dict:
    base = yaml.safe_load((ROOT / "params/cpu/01_gradient_flow.yaml").read_text()) or {}
    p = GradientFlowParams.from_mapping({**base, **overrides, "n_seeds": seeds, "checkpoint_interval": 0},
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidates", nargs="+", help="JSON objects of overrides on the cpu profile")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, help="append each candidate's result to this JSON file")
    args = ap.parse_args()
    for text in args.candidates:
        result = pilot(json.loads(text), args.seeds)
        print(json.dumps({k: v for k, v in result.items() if k not in ("test_loss",)}), flush=True)
        if args.out:
            done = json.loads(args.out.read_text()) if args.out.is_file() else []
            args.out.write_text(json.dumps(done + [result], indent=1) + "\n")


if __name__ == "__main__":
    main()
