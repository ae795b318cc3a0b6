"""Train one model of study 01 or 02 on every process of a torchrun launch: data-parallel, one GPU per process
(gloo processes on a CPU-only machine), the model, data, optimisation and global batch from a profile's parameter
file, so the run is that study's run of the model and seed (up to summation order; odebook.training.distributed).

    torchrun --nproc_per_node=8 scripts/train_ddp.py --study 01_gradient_flow --profile t4 --model hybrid
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \\
        scripts/train_ddp.py --study 02_time_indexed --profile t4 --model ti_mlp --lr 3e-4

Rank 0 evaluates, checkpoints every ``checkpoint_interval`` steps into <out>/checkpoint.pt (the same command
resumes from it) and writes <out>/history.json and <out>/model.pt; <out> is
outputs/ddp/<study>/<model>_seed<seed> unless --out says otherwise. The checkpoint is keyed by the run's fingerprint,
the notebooks' rule (odebook.training.fingerprint): a checkpoint made by another configuration (another batch size,
model setting, data file, process count …) is refused with a message, or replaced with --fresh.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
from pathlib import Path

import torch

from odebook.data import corpus as data
from odebook.params import ParamError
from odebook.training import distributed
from odebook import studies
from odebook.studies import validate_file
from odebook.training import checkpoint as ckpt
from odebook.training.fingerprint import run_fingerprint, run_key
from odebook.training.runtime import precision_for, seed_everything
from odebook.training.train import TrainConfig, train

arms01 = studies.load("01_gradient_flow").arms

ROOT = Path(__file__).resolve().parent.parent


def builders(study: str, p, vocab_size: int) -> dict:
    if study == "01_gradient_flow":
        return arms01.gradient_flow_arms(p.model_config(vocab_size))
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
    parser.add_argument("--params", type=Path, default=None, help="a parameter file instead of "
                        "params/<profile>/<study>.yaml")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--fresh", action="store_true", help="replace a checkpoint of another configuration in <out>")
    args = parser.parse_args(argv)
    try:
        p = validate_file(args.study, args.params or ROOT / "params" / args.profile / f"{args.study}.yaml")
    except ParamError as err:  # one message naming the file and each key, before any work: no traceback
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    _refuse_before_any_work(parser, p.batch_size)

    device = distributed.init()
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
    fingerprint = run_fingerprint(model=model, config=config, key=run_key(p), study=args.study, model_name=args.model,
                                  seed=seed, processes=distributed.world_size())
    _refuse_another_configuration(out / "checkpoint.pt", fingerprint, args.fresh, parser)
    hist = train(model, data.random_batches(splits.train, p.batch_size, p.seq_len, seed=seed),
                 data.fixed_batches(splits.valid, p.eval_batches, p.batch_size, p.seq_len), config,
                 precision_for(device), checkpoint=out / "checkpoint.pt", desc=f"{args.model} seed {seed}",
                 fingerprint=fingerprint)
    if distributed.is_main():
        (out / "history.json").write_text(json.dumps(hist.to_dict()))
        torch.save(model.state_dict(), out / "model.pt")
        print(f"{args.model} seed {seed}: {distributed.world_size()} processes, held-out loss "
              f"{hist.final_eval_loss:.6f} after {config.steps} steps → {out}")
    return hist.to_dict()


def _refuse_before_any_work(parser, batch_size: int) -> None:
    """One line, before data or models load: the script runs under torchrun, and the global batch splits evenly over
    its processes. Every rank exits; rank 0 alone says why."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        parser.error("run me under torchrun (RANK and WORLD_SIZE are not set): torchrun --nproc_per_node=N "
                     "scripts/train_ddp.py --study ... --model ...")
    n = int(os.environ["WORLD_SIZE"])
    if batch_size % n:
        if os.environ["RANK"] == "0":
            parser.error(f"the global batch of {batch_size} rows does not split evenly over {n} processes: choose "
                         f"a --nproc_per_node that divides it, or --params with another batch_size")
        sys.exit(2)


def _refuse_another_configuration(path: Path, fingerprint: str, fresh: bool, parser) -> None:
    """A checkpoint in <out> made by another configuration is not silently replaced: refused, or removed with
    --fresh (every rank sees the same file: the decision is the same on all)."""
    if not path.is_file():
        return
    try:
        theirs = ckpt.load(path)["fingerprint"]
    except ckpt.CheckpointError as err:  # the reason, in this script's words (--out, --fresh), not the notebooks'
        theirs = None if fresh else parser.error(f"{str(err).rsplit('; ', 1)[0]}; use another --out, or --fresh to "
                                                 "replace it")
    if theirs == fingerprint:
        return
    if not fresh:
        parser.error(f"{path} was made by another configuration (model, parameters, data files, process count or "
                     "the study's science code differ), so it is not resumed; use another --out, or --fresh to "
                     "replace it")
    distributed.barrier()  # every rank has read it before rank 0 removes it
    if distributed.is_main():
        ckpt.remove(path)


if __name__ == "__main__":
    try:
        with distributed.watched():
            main()
    except distributed.RankFrozen:  # its message is on stderr already
        sys.exit(1)
