"""A study notebook's side of the book: its start (parameters → output folder → precision), its verdicts, and where
and how it writes figures, tables and results.json (which the runner's index reads)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from odebook.book.index import FIGURE_ORDER, saved_figures
from odebook.book.kernel import AccountingOff, show_in_cell
from odebook.book.profile import apply_profile
from odebook.params import Params, injected_names
from odebook.params.papermill_cli import check_papermill_files
from odebook.params.folders import checkout_root
from odebook.training.executor import Local, Submitit, Workers, usable_cores
from odebook.training.fingerprint import run_key
from odebook.training.runtime import Precision, precision_for, resolve_device
from odebook.study.stats import Verdict

__all__ = ["start", "inline_figures", "output_dir", "checkpointing", "checkpoint_folder", "batch_shape", "run_options",
           "executor", "slurm_options", "layout", "tensorboard_dir", "save_figure", "save_table", "save_results",
           "show_verdicts", "repo_root", "to_jsonable"]


def start(schema: type[Params], namespace: Mapping[str, Any]) -> tuple[Params, Path, Precision]:
    """Every notebook's prologue: figures inline, ``$ODEBOOK_PROFILE`` applied (odebook.book.profile), the parameters
    cell's values (``globals()``) validated against ``schema``, the output folder made, the precision policy chosen
    for the device. Prints the profile applied, where outputs go and the policy."""
    inline_figures()
    applied = apply_profile(schema, namespace, repo_root())
    if injected_names(namespace.get("In", ())):  # run by papermill: its -f/-y/-b by the profile files' rules too
        check_papermill_files()
    params = schema.from_namespace(namespace)
    out = output_dir(params)
    precision = precision_for(resolve_device(params.device))
    ignored = params.ignored_keys()
    print(f"{applied}\n" * bool(applied) + f"{ignored}\n" * bool(ignored) + f"precision: {precision}\noutputs: {out}")
    return params, out, precision


def inline_figures() -> None:
    """Show figures inline in a notebook's kernel whatever ``$MPLBACKEND`` says: a non-interactive backend (Agg,
    which CI exports) would leave every executed report without its figures. Outside a kernel, nothing changes."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        shell.run_line_magic("matplotlib", "inline")


def repo_root() -> Path | None:
    """The odebook checkout this package was imported from, if it is one (None when pip-installed)."""
    return checkout_root()


def output_dir(params: Params) -> Path:
    """``params.output_dir`` (the runner sets it), else outputs/interactive/<study> in the checkout or cwd."""
    if params.output_dir:
        out = Path(params.output_dir)
    else:
        out = (repo_root() or Path.cwd()) / "outputs" / "interactive" / params.study
    (out / "figures").mkdir(parents=True, exist_ok=True)
    return out


def checkpointing(params: Params, out: Path) -> dict[str, Any]:
    """The checkpoint arguments of ``experiment.run_seeds`` for a study: the folder (``checkpoint_dir``, else
    <out>/checkpoints), ``fresh``, and the parameters that make up each run's key (all but where outputs go, which
    seeds, and logging) with the content hashes of its data files (odebook.training.fingerprint.run_key). Empty when
    ``checkpoint_interval`` is 0: nothing is stored then. The key holds the runs' layout over processes and threads
    (``layout``): a run stored under one is not reused under another, whose sums go in another order."""
    if not getattr(params, "checkpoint_interval", 0):
        return {}
    return {"checkpoints": checkpoint_folder(params, out), "fresh": params.fresh,
            "key": {**run_key(params), "threads": layout(params)}}


def checkpoint_folder(params: Params, out: Path) -> Path:
    """Where a study's runs keep their checkpoints: ``checkpoint_dir``, else <out>/checkpoints."""
    return Path(params.checkpoint_dir) if getattr(params, "checkpoint_dir", "") else out / "checkpoints"


def batch_shape(params: Params) -> dict[str, int]:
    """Batch size, sequence length and evaluation batches: the keywords of ``odebook.study.task.lm_task``."""
    return {"batch_size": params.batch_size, "seq_len": params.seq_len, "eval_batches": params.eval_batches}


def run_options(params: Params, out: Path, log: str = "runs") -> dict[str, Any]:
    """The keyword arguments of ``experiment.run_seeds`` (and ``tune_then_run``) that the machine's settings fix: its
    TensorBoard folder, checkpointing and executor. The seeds are the study's (``params.seed_plan``). Where the runs
    leave this kernel (workers, jobs), their progress shows under the cell (odebook.book.kernel.show_in_cell)."""
    ex = executor(params, out)
    if not isinstance(ex, Local):
        show_in_cell(out)
    return {"log_dir": tensorboard_dir(out, params, log), **checkpointing(params, out), "executor": ex}


# ``auto`` runs a study's runs side by side only where each trains at least this many steps. Measured on a 2-core Zen 4
# (python -m benchmarks.side_by_side, interleaved): at the cpu profiles' shapes two one-thread workers gave 1.17-1.47x
# the seed-runs per minute of one two-thread process; the smoke profiles' runs (4-20 steps) took 1.2-1.7x longer
# side by side, the workers' start (seconds of imports) and each job's transfer outweighing their training.
SIDE_BY_SIDE_STEPS = 100


def executor(params: Params, out: Path) -> Local | Workers | Submitit:
    """The executor the parameters name (odebook.training.executor): ``Local()``; ``Workers`` of one thread, one per
    usable core (``auto`` chooses them where the runs are on a CPU with several cores and train at least
    SIDE_BY_SIDE_STEPS steps); or ``Submitit`` with the SLURM options, its jobs' folder ``executor_folder`` (else
    <checkpoint folder>/jobs) and the parameters' device, which each job resolves on its own node."""
    cores = usable_cores()
    side_by_side = (cores > 1 and resolve_device(params.device).type == "cpu"
                    and getattr(params, "steps", 0) >= SIDE_BY_SIDE_STEPS)
    if params.executor == "local" or (params.executor == "auto" and not side_by_side):
        return Local()
    if params.executor in ("auto", "workers"):
        return Workers(cores)
    folder = Path(params.executor_folder) if params.executor_folder else checkpoint_folder(params, out) / "jobs"
    AccountingOff.install()  # a cluster without accounting: submitit's sacct warnings stay off the report
    return Submitit(folder, device=params.device, **slurm_options(params))


def slurm_options(params: Params) -> dict[str, Any]:
    """The parameters' SLURM options (``slurm_*``), as ``Submitit`` takes them: the same names, the only defaults."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if f.name.startswith("slurm_")}


def layout(params: Params) -> str:
    """How the study's runs are laid out over processes and threads, in words: it sets the order of the
    arithmetic's sums, so the manifest records it and the re-run key holds it."""
    ex = executor(params, Path())
    if isinstance(ex, Workers):
        return ex.describe()
    if isinstance(ex, Submitit):
        return "submitit jobs, each on its node's threads"
    return f"this process × {torch.get_num_threads()} threads"


def tensorboard_dir(out: Path, params: Params, run: str) -> Path | None:
    """<out>/tensorboard/<run> when the parameters ask for TensorBoard logs (``tensorboard: true``), else None."""
    return out / "tensorboard" / run if getattr(params, "tensorboard", False) else None


def save_figure(fig, out: Path, name: str) -> None:
    """Save ``fig`` as figures/<name>.png (it is shown inline by the notebook as usual), and note its name in
    figures/order.txt the first time: the front page's thumbnail is the study's first figure, its key one."""
    fig.savefig(out / "figures" / f"{name}.png", dpi=120, bbox_inches="tight")
    saved = saved_figures(out / "figures")
    if name not in saved:
        (out / "figures" / FIGURE_ORDER).write_text("".join(f"{n}\n" for n in [*saved, name]))


def save_table(table, out: Path, name: str, float_format: str = "{:.4g}") -> None:
    """Write a pandas DataFrame as <name>.csv, <name>.md and <name>.tex."""
    table.to_csv(out / f"{name}.csv")
    (out / f"{name}.md").write_text(table.to_markdown(floatfmt=".4g"))
    numbers = list(table.select_dtypes("number").columns)
    (out / f"{name}.tex").write_text(table.style.format(float_format, na_rep="–", subset=numbers).to_latex(hrules=True))


def to_jsonable(x: Any) -> Any:
    """Numbers, tensors, arrays, dataclass-like dicts → plain JSON; NaN/inf become null; a table (pandas DataFrame)
    becomes its rows as records, a named index as their first field(s)."""
    if isinstance(x, pd.DataFrame):
        return to_jsonable((x.reset_index() if any(x.index.names) else x).to_dict("records"))
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, (torch.Tensor, np.ndarray)):
        return to_jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def show_verdicts(verdicts: Sequence[Verdict]) -> None:
    """Display the verdicts as a Markdown list: claim, outcome, evidence, and the scale it was measured at; then name
    every negative control that held — its test then cannot tell the claimed effect from its absence."""
    from IPython.display import Markdown, display

    display(Markdown("\n".join(v.markdown() for v in verdicts)))
    held = [v.claim for v in verdicts if v.claim.startswith("negative control:") and v.outcome == "held"]
    if held:
        print("A NEGATIVE CONTROL HELD — the test cannot tell the claimed effect from its absence:", held)


def save_results(out: Path, headline: dict[str, Any], *, verdicts: Sequence[Verdict] = (), **details: Any) -> None:
    """Write results.json: ``headline`` (the few numbers the index shows), the verdicts (each also as a headline
    entry "verdict: <claim>") and any further details."""
    headline = {**headline, **{f"verdict: {v.claim}": v.outcome for v in verdicts}}
    record = {"headline": headline, "verdicts": [v.to_dict() for v in verdicts], **details}
    (out / "results.json").write_text(json.dumps(to_jsonable(record), indent=2))
