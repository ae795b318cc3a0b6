"""Train one model of study 01 or 02 on every process of a torchrun launch: data-parallel, one GPU per process
(gloo processes on a CPU-only machine), the model, data, optimisation and global batch from a profile's parameter
file, so the run is that study's run of the model and seed (up to summation order; odebook.training.distributed).

    torchrun --nproc_per_node=8 scripts/train_ddp.py --study 01_gradient_flow --profile t4 --model hybrid
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \\
        scripts/train_ddp.py --study 02_time_indexed --profile t4 --model ti_mlp --lr 3e-4

Rank 0 evaluates, checkpoints every ``checkpoint_interval`` steps into <out>/checkpoint.pt (the same command
resumes from it) and writes <out>/history.json and <out>/model.pt; <out> is
outputs/ddp/<study>/<model>_seed<seed> unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from pathlib import Path

import torch

from odebook.data import corpus as data
from odebook.training import distributed
from odebook.models.arms import gradient_flow_arms
from odebook.params import validate_file
from odebook.training.runtime import precision_for, seed_everything
from odebook.training.train import TrainConfig, train

ROOT = Path(__file__).resolve().parent.parent


def builders(study: str, p, vocab_size: int) -> dict:
    if study == "01_gradient_flow":
        return gradient_flow_arms(p.model_config(vocab_size))
    return {name: functools.partial(p.model_config(vocab_size).build, name) for name in p.models}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, choices=("01_gradient_flow", "02_time_indexed"))
    parser.add_argument("--profile", default="t4", help="a folder of params/ (default t4)")
    parser.add_argument("--model", required=True, help="an arm of study 01 or a model of study 02's parameters")
    parser.add_argument("--seed", type=int, default=None, help="default: the parameter file's seed")
    parser.add_argument("--lr", type=float, default=None, help="default: the parameter file's lr (02 chooses per "
                        "model in its notebook: pass the chosen one)")
    parser.add_argument("--steps", type=int, default=None, help="default: the parameter file's steps")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    device = distributed.init()
    p = validate_file(args.study, ROOT / "params" / args.profile / f"{args.study}.yaml")
    splits = data.tokenize(data.load_corpus(p.corpus, **p.corpus_files()), data.get_tokenizer(p.tokenizer))
    models = builders(args.study, p, splits.vocab_size)
    if args.model not in models:
        parser.error(f"--model {args.model!r}: not a model of {args.study} here; known: {', '.join(models)}")
    seed = p.seed if args.seed is None else args.seed
    config = TrainConfig.from_params(p, steps=args.steps)
    config = config if args.lr is None else dataclasses.replace(config, lr=args.lr)
    out = args.out or ROOT / "outputs" / "ddp" / args.study / f"{args.model}_seed{seed}"
    out.mkdir(parents=True, exist_ok=True)

    seed_everything(seed)
    model = models[args.model]().to(device)
    hist = train(model, data.random_batches(splits.train, p.batch_size, p.seq_len, seed=seed),
                 data.fixed_batches(splits.valid, p.eval_batches, p.batch_size, p.seq_len), config,
                 precision_for(device), checkpoint=out / "checkpoint.pt", desc=f"{args.model} seed {seed}",
                 fingerprint=json.dumps({"study": args.study, "profile": args.profile, "model": args.model,
                                         "seed": seed, "config": dataclasses.asdict(config),
                                         "processes": distributed.world_size()}))
    if distributed.is_main():
        (out / "history.json").write_text(json.dumps(hist.to_dict()))
        torch.save(model.state_dict(), out / "model.pt")
        print(f"{args.model} seed {seed}: {distributed.world_size()} processes, held-out loss "
              f"{hist.final_eval_loss:.6f} after {config.steps} steps → {out}")
    return hist.to_dict()


if __name__ == "__main__":
    main()
