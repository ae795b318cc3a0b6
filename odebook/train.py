"""The training loop every study uses.

AdamW with gradient clipping; per step the loss, the time (device synchronised) and the gradient norm in total and
per named group of parameters, measured before clipping — only for steps the optimiser took: a step whose gradients
are not finite (an fp16 overflow the GradScaler skips) is counted in ``skipped_steps`` and left out of the gradient
statistics; held-out evaluation at intervals on a fixed list of
batches; the precision policy of ``odebook.runtime``; a guard that stops a run whose loss is no longer finite, keeping the
metrics recorded so far on the exception; and, opt-in, TensorBoard logs of the same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from odebook.models import lm_loss
from odebook.runtime import Precision, synchronize

__all__ = ["TrainConfig", "History", "DivergenceError", "train", "evaluate", "grad_norm"]

LossFn = Callable[[nn.Module, object], torch.Tensor]


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    lr: float
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    eval_interval: int = 50

    @classmethod
    def from_params(cls, params, *, steps: int | None = None) -> "TrainConfig":
        """The optimisation settings of a study's parameters (odebook.params.LMParams); ``steps`` overrides theirs."""
        return cls(steps=params.steps if steps is None else steps, lr=params.lr, weight_decay=params.weight_decay,
                   grad_clip=params.grad_clip, eval_interval=params.eval_interval)


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
          log_dir: str | Path | None = None) -> History:
    """Train ``model`` for ``config.steps`` steps on ``batches`` with ``loss_fn``; evaluate ``eval_batches`` with
    ``eval_loss_fn`` (default: ``loss_fn``) every ``eval_interval`` steps and at the end. Raises DivergenceError
    (with the history so far) when the loss is not finite. With ``log_dir``, TensorBoard logs go there: per step
    train/loss, train/perplexity, train/lr, grad_norm/<group> (before clipping) and train/step_ms; per evaluation
    eval/loss and eval/perplexity."""
    writer = _tensorboard(log_dir)
    try:
        return _train(model, batches, eval_batches, config, precision, groups=groups, loss_fn=loss_fn,
                      eval_loss_fn=eval_loss_fn, desc=desc, progress=progress, writer=writer)
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


def _train(model, batches, eval_batches, config, precision, *, groups, loss_fn, eval_loss_fn, desc, progress,
           writer) -> History:
    model.to(precision.device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=config.betas,
                                  fused=precision.device.type in ("cpu", "cuda"))
    scaler = precision.scaler()
    groups = dict(groups or {})
    hist = History(grad_norm={name: [] for name in ["total", *groups]})

    bar = tqdm(range(1, config.steps + 1), desc=desc, disable=not progress, mininterval=2.0, leave=True)
    for step in bar:
        batch = _to(next(batches), precision.device)
        synchronize(precision.device)
        t0 = time.perf_counter()
        with precision.autocast():
            loss = loss_fn(model, batch)
        value = loss.item()
        if not math.isfinite(value):
            raise DivergenceError(f"{desc}: the training loss became {value} at step {step} of {config.steps}; "
                                  f"stopped. Metrics of steps 1..{step - 1} are kept in the exception's history. "
                                  "Try a lower lr or a smaller grad_clip.", hist)
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
        if taken:  # gradient statistics only from steps the optimiser took
            hist.grad_step.append(step)
            hist.grad_norm["total"].append(total)
            for name, norm in norms.items():
                hist.grad_norm[name].append(norm)
        else:
            hist.skipped_steps.append(step)
        if step % config.eval_interval == 0 or step == config.steps:
            hist.eval_step.append(step)
            hist.eval_loss.append(evaluate(model, eval_batches, precision, eval_loss_fn or loss_fn))
            bar.set_postfix(loss=f"{value:.3f}", eval=f"{hist.eval_loss[-1]:.3f}", refresh=False)
            if writer is not None:
                writer.add_scalar("eval/loss", hist.eval_loss[-1], step)
                writer.add_scalar("eval/perplexity", _perplexity(hist.eval_loss[-1]), step)
        if writer is not None:
            _log_step(writer, hist, step, optimizer.param_groups[0]["lr"])
    return hist
