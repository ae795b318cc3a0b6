"""A training run that tests start in several processes (odebook.training.distributed.launch needs an importable
function)."""

import os
import signal
import sys
import time

import torch

from odebook.models import lm as models
from odebook.training import distributed
from odebook.data.corpus import fixed_batches, random_batches
from odebook.training.runtime import Precision, precision_for, seed_everything
from odebook.training.train import TrainConfig, train

TOKENS = torch.randint(0, 50, (5000,), generator=torch.Generator().manual_seed(0))
SHAPE = dict(vocab_size=50, d_model=16, n_layer=2, n_head=2, max_seq_len=16, dropout=0.0)


class Interrupted(Exception):
    pass


def stream(seed: int, stop_after: int | None):
    """The seeded global batch stream (4 rows), raising after ``stop_after`` batches, like a killed run."""
    for i, batch in enumerate(random_batches(TOKENS, 4, 16, seed=seed)):
        if stop_after is not None and i == stop_after:
            raise Interrupted(f"interrupted after {stop_after} batches")
        yield batch


def run(steps: int, checkpoint: str | None = None, interval: int = 0, stop_after: int | None = None,
        seed: int = 0, dropout: float = 0.0, device: str = "cpu"):
    """Train the tiny baseline in fp32 on ``device`` ("cuda": this rank's GPU); returns (losses, total gradient
    norms, evaluation losses, final weights on the CPU) on every rank."""
    seed_everything(seed)
    where = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    model = models.gpt(**{**SHAPE, "dropout": dropout}).to(where)
    precision = precision_for(where) if where.type == "cpu" else Precision(where, None)  # fp32 on a GPU too
    hist = train(model, stream(seed, stop_after), fixed_batches(TOKENS, 2, 4, 16),
                 TrainConfig(steps=steps, lr=1e-2, eval_interval=2, checkpoint_interval=interval),
                 precision, progress=False, checkpoint=checkpoint, fingerprint="test")
    weights = {k: v.cpu().clone() for k, v in model.state_dict().items()}
    return hist.loss, hist.grad_norm["total"], hist.eval_loss, weights


def freeze_rank_one(after: int = 3) -> None:
    """Collectives in a loop; rank 1 stops itself after ``after`` of them, as ``kill -STOP`` on it would."""
    for i in range(100_000):
        if distributed.rank() == 1 and i == after:
            print(f"stopping rank 1 at {time.time()}", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        distributed.mean(torch.ones(1))
        time.sleep(0.01)


if __name__ == "__main__":  # torchrun -m ddp_worker: the frozen-rank test (tests/training/test_frozen_rank.py)
    distributed.init()
    try:
        with distributed.watched():
            freeze_rank_one()
    except distributed.RankFrozen:  # its message is on stderr already
        sys.exit(1)
