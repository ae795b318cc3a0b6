"""The training loop every study uses.

AdamW with gradient clipping; per step the loss, the time (device synchronised) and the gradient norm in total and
per named group of parameters, measured before clipping — only for steps the optimiser took: a step whose gradients
are not finite (an fp16 overflow the GradScaler skips) is counted in ``skipped_steps`` and left out of the gradient
statistics; held-out evaluation at intervals on a fixed list of
batches; the precision policy of ``odebook.training.runtime``; a guard that stops a run whose loss is no longer finite,
keeping the metrics recorded so far on the exception; opt-in TensorBoard logs of the same numbers; checkpoints every
``checkpoint_interval`` steps that a re-run resumes from bit for bit (``odebook.training.checkpoint``); and
data-parallel training when ``torch.distributed`` is initialised (``odebook.training.distributed``): each rank takes its
rows of the same global batch, DistributedDataParallel averages the gradients, rank 0 evaluates and writes checkpoints.
Where ``$ODEBOOK_PROGRESS_FILE`` names a file (the runner sets it, odebook.book.kernel), the loop appends a line there
every ``PROGRESS_EVERY`` seconds and at its last step — the run, its step of its steps, the time taken and the time
left at the rate so far — whatever process it runs in; the cost is a clock read a step and a short write every few
seconds.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from odebook.training import checkpoint as ckpt
from odebook.training import distributed
from odebook.models.lm import lm_loss
from odebook.training.runtime import Precision, synchronize

__all__ = ["TrainConfig", "History", "DivergenceError", "train", "evaluate", "grad_norm", "PROGRESS_ENV",
           "PROGRESS_EVERY"]

PROGRESS_ENV = "ODEBOOK_PROGRESS_FILE"  # where a run reports its progress, if anywhere
PROGRESS_EVERY = 2.0  # seconds between two reports of one run

LossFn = Callable[[nn.Module, object], torch.Tensor]


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    lr: float
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    eval_interval: int = 50
    checkpoint_interval: int = 0  # steps between checkpoints; 0 = none

    @classmethod
    def from_params(cls, params, *, steps: int | None = None) -> "TrainConfig":
        """The optimisation settings of a study's parameters (odebook.params.LMParams); ``steps`` overrides theirs."""
        return cls(steps=params.steps if steps is None else steps, lr=params.lr, weight_decay=params.weight_decay,
                   grad_clip=params.grad_clip, eval_interval=params.eval_interval,
                   checkpoint_interval=getattr(params, "checkpoint_interval", 0))


@dataclass
class History:
    """Everything a run measured; lists are per step unless named eval_*."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    grad_norm: dict[str, list[float]] = field(default_factory=dict)  # "total" and one per group, at grad_step
    grad_step: list[int] = field(default_factory=list)  # steps the optimiser took (finite gradients)
    skipped_steps: list[int] = field(default_factory=list)  # steps skipped for non-finite gradients (fp16 overflow)
    step_time: list[float] = field(default_factory=list)  # seconds, device synchronised
    eval_step: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    scalars: dict[str, list[float]] = field(default_factory=dict)  # each 0-dim parameter (an ODE block's α), per step
    resumed_at: int = 0  # the step a resumed run restarted from (0: trained from the start)

    def grad_stats(self, group: str = "total", vanishing: float = 1e-6, exploding: float = 100.0) -> dict:
        """Over the steps the optimiser took: whether every gradient norm of ``group`` was finite, how many fell
        below ``vanishing`` or rose above ``exploding``, the mean norm; and how many steps were skipped."""
        g = torch.tensor(self.grad_norm[group], dtype=torch.float64)
        return {"finite": bool(torch.isfinite(g).all()), "vanishing": int((g < vanishing).sum()),
                "exploding": int((g > exploding).sum()), "mean": g.mean().item(), "skipped": len(self.skipped_steps)}

    @property
    def final_eval_loss(self) -> float:
        """The last held-out evaluation (never the minimum over evaluations)."""
        return self.eval_loss[-1]

    def to_dict(self) -> dict:
        return asdict(self)


class DivergenceError(RuntimeError):
    """The loss became NaN or infinite. ``history`` holds the metrics up to the last finite step."""

    def __init__(self, message: str, history: History):
        super().__init__(message)
        self.history = history


def grad_norm(params: Sequence[nn.Parameter]) -> float:
    """L2 norm of the gradients of ``params`` (parameters without a gradient count as zero)."""
    norms = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return torch.stack(norms).norm().item() if norms else 0.0


@torch.no_grad()
def evaluate(model: nn.Module, batches: Sequence, precision: Precision, loss_fn: LossFn = lm_loss) -> float:
    """Mean loss over ``batches`` in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    total = 0.0
    for batch in batches:
        with precision.autocast():
            total += loss_fn(model, _to(batch, precision.device)).item()
    model.train(was_training)
    return total / len(batches)


def _to(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    return type(batch)(_to(b, device) for b in batch)


def train(model: nn.Module, batches: Iterator, eval_batches: Sequence, config: TrainConfig, precision: Precision,
          *, groups: Mapping[str, Sequence[nn.Parameter]] | None = None, loss_fn: LossFn = lm_loss,
          eval_loss_fn: LossFn | None = None, desc: str = "train", progress: bool = True,
          log_dir: str | Path | None = None, checkpoint: str | Path | None = None, fingerprint: str = "") -> History:
    """Train ``model`` for ``config.steps`` steps on ``batches`` with ``loss_fn``; evaluate ``eval_batches`` with
    ``eval_loss_fn`` (default: ``loss_fn``) every ``eval_interval`` steps and at the end. Raises DivergenceError
    (with the history so far) when the loss is not finite. With ``log_dir``, TensorBoard logs go there: per step
    train/loss, train/perplexity, train/lr, grad_norm/<group> (before clipping) and train/step_ms; per evaluation
    eval/loss and eval/perplexity.

    With ``checkpoint`` (a file path) and ``config.checkpoint_interval``, the model, optimiser, gradient scaler, every
    RNG state, the step reached (the position in ``batches``) and the history are saved there atomically every
    ``checkpoint_interval`` steps; a later call with the same path and ``fingerprint`` resumes from it and gives the
    same losses, gradient norms and weights as an uninterrupted run. A checkpoint with another fingerprint is
    ignored (the run starts afresh and overwrites it)."""
    writer = _tensorboard(log_dir) if distributed.is_main() else None
    try:
        return _train(model, batches, eval_batches, config, precision, groups=groups, loss_fn=loss_fn,
                      eval_loss_fn=eval_loss_fn, desc=desc, progress=progress and distributed.is_main(),
                      writer=writer, checkpoint=checkpoint, fingerprint=fingerprint)
    finally:
        if writer is not None:
            writer.close()


def _tensorboard(log_dir: str | Path | None):
    if log_dir is None:
        return None
    from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package; imported only when asked

    return SummaryWriter(str(log_dir))


def _perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf  # exp overflows a float beyond ~709


def _log_step(writer, hist: History, step: int, lr: float) -> None:
    writer.add_scalar("train/loss", hist.loss[-1], step)
    writer.add_scalar("train/perplexity", _perplexity(hist.loss[-1]), step)
    writer.add_scalar("train/lr", lr, step)
    writer.add_scalar("train/step_ms", 1000 * hist.step_time[-1], step)
    for name, norms in hist.grad_norm.items():
        writer.add_scalar(f"grad_norm/{name}", norms[-1], step)


def _resume(path, fingerprint, model, optimizer, scaler, batches) -> tuple[int, History | None]:
    """Restore a checkpoint made by this configuration; returns the step it reached and its history."""
    if path is None or not Path(path).is_file():
        return 0, None
    state = ckpt.load(path)
    if state["fingerprint"] != fingerprint:
        return 0, None
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scaler.load_state_dict(state["scaler"])
    for _ in range(state["step"]):  # the batch stream is seeded: replaying it puts it where the run stopped
        next(batches)
    ckpt.set_rng_state(state["rng"])
    return state["step"], History(**{**state["history"], "resumed_at": state["step"]})


def _divergence_causes(model: nn.Module, *, updated: bool) -> str:
    """What can make the loss non-finite at this step, and the model's largest values (where an initial scale such
    as alpha_init, 1e30, shows)."""
    largest = sorted(((p.detach().abs().max().item(), name) for name, p in model.named_parameters() if p.numel()),
                     reverse=True)[:3]
    values = ", ".join(f"{name} = {size:.3g}" for size, name in largest)
    if not updated:
        return ("No update was taken yet, so lr and grad_clip are not the cause: the model's initial values are "
                f"(its initial scales, such as alpha_init, or its width and depth) or the data. Largest |values|: "
                f"{values}.")
    return (f"Try a lower lr or a smaller grad_clip, or smaller initial scales (such as alpha_init). Largest "
            f"|values| now: {values}.")


def _reporter(desc: str, start: int, steps: int) -> Callable[[int], None]:
    """What reports a run's progress to ``$PROGRESS_ENV``'s file (a no-op where it is unset, and off the main rank)."""
    path = os.environ.get(PROGRESS_ENV)
    if not path or not distributed.is_main():
        return lambda step: None
    t0 = last = time.monotonic()

    def report(step: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY and step < steps:
            return
        last, done = now, step - start
        left = tqdm.format_interval((steps - step) * (now - t0) / done) if done else "?"
        with open(path, "a", encoding="utf-8") as f:  # one short line: appended whole by each process
            f.write(f"{desc}: step {step}/{steps}, {tqdm.format_interval(now - t0)} taken, {left} left\n")
    return report


def _train(model, batches, eval_batches, config, precision, *, groups, loss_fn, eval_loss_fn, desc, progress,
           writer, checkpoint, fingerprint) -> History:
    model.to(precision.device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=config.betas,
                                  fused=precision.device.type in ("cpu", "cuda"))
    scaler = precision.scaler()
    groups = dict(groups or {})
    scalars = {name: p for name, p in model.named_parameters() if p.dim() == 0}  # recorded each step (History)
    start, hist = _resume(checkpoint, fingerprint, model, optimizer, scaler, batches)
    hist = hist or History(grad_norm={name: [] for name in ["total", *groups]})
    net = distributed.wrap(model)

    bar = tqdm(range(start + 1, config.steps + 1), desc=desc, disable=not progress, mininterval=2.0, leave=True)
    report = _reporter(desc, start, config.steps)
    for step in bar:
        batch = _to(distributed.shard(next(batches)), precision.device)
        synchronize(precision.device)
        t0 = time.perf_counter()
        with precision.autocast():
            loss = loss_fn(net, batch)
        value = distributed.mean(loss.detach()).item()
        if not math.isfinite(value):
            raise DivergenceError(f"{desc}: the training loss became {value} at step {step} of {config.steps}; "
                                  f"stopped. Metrics of steps 1..{step - 1} are kept in the exception's history. "
                                  + _divergence_causes(model, updated=step > 1), hist)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norms = {name: grad_norm(ps) for name, ps in groups.items()}  # all norms are taken before clipping
        total = torch.nn.utils.clip_grad_norm_(params, config.grad_clip).item()
        taken = math.isfinite(total)  # a GradScaler skips exactly such a step (inf/NaN in some gradient)
        if scaler.is_enabled():
            scaler.step(optimizer)  # skips the update itself when the unscaled gradients are not finite
            scaler.update()
        elif taken:
            optimizer.step()
        synchronize(precision.device)
        hist.step_time.append(time.perf_counter() - t0)

        hist.step.append(step)
        hist.loss.append(value)
        for name, scalar in scalars.items():
            hist.scalars.setdefault(name, []).append(scalar.item())
        if taken:  # gradient statistics only from steps the optimiser took
            hist.grad_step.append(step)
            hist.grad_norm["total"].append(total)
            for name, norm in norms.items():
                hist.grad_norm[name].append(norm)
        else:
            hist.skipped_steps.append(step)
        if step % config.eval_interval == 0 or step == config.steps:
            hist.eval_step.append(step)
            hist.eval_loss.append(distributed.on_main(lambda: evaluate(model, eval_batches, precision,
                                                                       eval_loss_fn or loss_fn)))
            bar.set_postfix(loss=f"{value:.3f}", eval=f"{hist.eval_loss[-1]:.3f}", refresh=False)
            if writer is not None:
                writer.add_scalar("eval/loss", hist.eval_loss[-1], step)
                writer.add_scalar("eval/perplexity", _perplexity(hist.eval_loss[-1]), step)
        if writer is not None:
            _log_step(writer, hist, step, optimizer.param_groups[0]["lr"])
        report(step)
        if checkpoint is not None and config.checkpoint_interval and step % config.checkpoint_interval == 0 \
                and step < config.steps and distributed.is_main():
            ckpt.save(checkpoint, {"fingerprint": fingerprint, "step": step, "model": model.state_dict(),
                                   "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
                                   "rng": ckpt.rng_state(), "history": hist.to_dict()})
    return hist
