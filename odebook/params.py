"""Strict, typed parameters for each study.

A study's parameters are a dataclass whose fields carry their constraints (``spec``). They are read from the
notebook's parameters cell (``Params.from_namespace``) or from a profile's YAML file (``load_yaml``), and every
problem — an unknown key, a wrong type, a value out of range, data that cannot be found — is collected into one
``ParamError`` naming the source, the key and what is allowed, before any compute starts.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml

from odebook.nn.hypernet import TIME_MLPS
from odebook.nn.modulated import NORMS
from odebook.nn.ode import FIXED_GRID, SENSITIVITIES, SOLVERS, ode_layers_problem, solver_problem

__all__ = ["ParamError", "Params", "LMParams", "GradientFlowParams", "TimeIndexedParams", "RetrievalParams",
           "GDNScalingParams", "MixedTrainingParams", "ODESolverParams", "STUDIES",
           "spec", "INT_LIMIT",
           "load_yaml", "validate_file", "validate_values"]

INT_LIMIT = 2**32 - 1  # every integer parameter stays within numpy's seed range (seeds are the largest integers)


class ParamError(ValueError):
    """Invalid parameters: the message names the source, every offending key and what is allowed."""


def spec(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
         choices: tuple | None = None, min_len: int = 1, help: str = "") -> Any:
    """A dataclass field with bounds (``ge``/``gt``/``le``) or allowed ``choices``; a list needs at least
    ``min_len`` entries and each entry is held to the bounds; lists get a fresh copy."""
    meta = {"ge": ge, "gt": gt, "le": le, "choices": choices, "min_len": min_len, "help": help}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    return {int: "an integer", float: "a finite number", bool: "true/false", str: "a string"}[tp]


def _coerce(value: Any, tp: Any) -> Any:
    """Return ``value`` as type ``tp`` or raise TypeError. bool is never an int; '3e-4' is a float; NaN and
    infinities are not numbers a study can use."""
    if typing.get_origin(tp) is list:
        if not isinstance(value, (list, tuple)):
            raise TypeError
        (inner,) = typing.get_args(tp)
        return [_coerce(v, inner) for v in value]
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise TypeError
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError
    if tp is float:
        if isinstance(value, str):  # PyYAML reads 3e-4 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise TypeError from None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError
        try:
            value = float(value)
        except OverflowError:  # an integer too large for a float
            raise TypeError from None
        if not math.isfinite(value):
            raise TypeError
        return value
    if tp is str:
        if isinstance(value, str):
            return value
        raise TypeError
    raise TypeError(f"unsupported parameter type {tp!r}")


def _check_bounds(value: Any, meta: Mapping[str, Any]) -> str | None:
    if isinstance(value, list) and len(value) < meta["min_len"]:
        return f"needs at least {meta['min_len']} {'entry' if meta['min_len'] == 1 else 'entries'}"
    items = value if isinstance(value, list) else [value]
    for v in items:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT_LIMIT:
            return f"must be <= {INT_LIMIT}"
        if meta["choices"] is not None and v not in meta["choices"]:
            return f"must be one of {', '.join(map(repr, meta['choices']))}"
        if meta["ge"] is not None and v < meta["ge"]:
            return f"must be >= {meta['ge']}"
        if meta["gt"] is not None and v <= meta["gt"]:
            return f"must be > {meta['gt']}"
        if meta["le"] is not None and v > meta["le"]:
            return f"must be <= {meta['le']}"
    return None


@dataclasses.dataclass
class Params:
    """Fields every study has. Subclasses add their own and override ``cross_checks``."""

    study: ClassVar[str] = ""

    seed: int = spec(0, ge=0, help="first seed; seed i of n_seeds is seed + i")
    n_seeds: int = spec(1, ge=1, le=20, help="independent training runs per model")
    device: str = spec("auto", choices=("auto", "cpu", "cuda"), help="auto = cuda when available")
    output_dir: str = spec("", help="where figures and results go; '' = outputs/interactive/<study>")

    # -- construction ---------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str) -> "Params":
        """Validate ``values`` (all keys must be fields) and return the parameters, or raise one ParamError."""
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in dataclasses.fields(cls)}
        errors: list[str] = []
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                errors.append(f"unknown key '{key}'{hint}; allowed keys: {', '.join(sorted(known))}")
                continue
            tp, meta = hints[key], known[key].metadata
            try:
                v = _coerce(value, tp)
            except TypeError:
                errors.append(f"key '{key}' = {value!r}: must be {_type_name(tp)}")
                continue
            problem = _check_bounds(v, meta)
            if problem:
                errors.append(f"key '{key}' = {value!r}: {problem}")
                continue
            kwargs[key] = v
        if not errors:
            params = cls(**kwargs)
            errors.extend(params._generic_checks())
            errors.extend(params.cross_checks())
        if errors:
            raise ParamError(f"{source}: invalid parameters for {cls.study or cls.__name__}:\n  - "
                             + "\n  - ".join(errors))
        return params

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any], source: str = "notebook parameters") -> "Params":
        """Pick this study's fields out of a notebook's globals and validate them. A name that papermill injected
        (``papermill -p NAME VALUE``) but the schema does not know is an unknown key, as in a YAML file: papermill
        itself only warns. The injected cell is found in IPython's input history (``In``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in namespace.items() if k in names}
        injected = injected_names(namespace.get("In", ()))
        values.update({k: namespace.get(k) for k in injected - names})
        return cls.from_mapping(values, source if not injected else "papermill parameters (-p/-f)")

    def _generic_checks(self) -> list[str]:
        """Rules every study shares: all seeds within numpy's range, and a device that exists."""
        errors = []
        if self.seed + self.n_seeds - 1 > INT_LIMIT:
            errors.append(f"key 'seed' = {self.seed}: seed + n_seeds - 1 must be <= {INT_LIMIT} (numpy's seed range)")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                errors.append("key 'device' = 'cuda': this machine has no CUDA device; use 'auto' or 'cpu'")
        return errors

    def cross_checks(self) -> list[str]:
        """Constraints between fields, and data availability; each problem as one line."""
        return []

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def describe(cls) -> str:
        """A table of keys, types, defaults and constraints, for error messages and the README."""
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append(f"{f.name}: {_type_name(hints[f.name])}, default {default!r}. {f.metadata.get('help', '')}")
        return "\n".join(rows)


INJECTED_CELL_HEADER = "# Parameters"  # papermill's first line of the cell it injects after the parameters cell


def injected_names(history: Any) -> set[str]:
    """Names assigned by papermill's injected-parameters cell(s) in an IPython input history (``In``)."""
    names: set[str] = set()
    if not isinstance(history, (list, tuple)):
        return names
    for source in history:
        if not (isinstance(source, str) and source.startswith(INJECTED_CELL_HEADER)):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names.update(t.id for node in tree.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name))
    return names


def _data_problems(corpus: str, tokenizer: str) -> list[str]:
    from odebook.data import DataError, check_data

    try:
        check_data(corpus, tokenizer)
    except DataError as err:
        return [f"key 'corpus' = {corpus!r}: {err}"]
    return []


@dataclasses.dataclass
class LMParams(Params):
    """Fields and checks of every study that trains language models on a corpus; studies override defaults."""

    corpus: str = spec("wikitext2", choices=("wikitext2",))
    tokenizer: str = spec("gpt2", choices=("gpt2", "bytes"))
    n_head: int = spec(4, ge=1)
    seq_len: int = spec(64, ge=2, help="training and evaluation context")
    max_seq_len: int = spec(64, ge=2, help="size of the positional embedding")
    batch_size: int = spec(32, ge=1)
    steps: int = spec(500, ge=1)
    lr: float = spec(3e-4, gt=0.0, le=1.0)
    weight_decay: float = spec(0.1, ge=0.0)
    grad_clip: float = spec(1.0, gt=0.0)
    eval_interval: int = spec(50, ge=1)
    eval_batches: int = spec(20, ge=1, help="fixed held-out batches evaluated at every interval")
    tensorboard: bool = spec(False, help="also write TensorBoard logs to <output_dir>/tensorboard/")
    checkpoint_interval: int = spec(100, ge=0, help="steps between checkpoints of each run (resumed on a re-run); 0 = none")
    checkpoint_dir: str = spec("", help="where runs keep checkpoints; empty = <output_dir>/checkpoints")
    fresh: bool = spec(False, help="ignore stored checkpoints: train every run from the start")

    width_key: ClassVar[str] = "d_model"  # the field holding the model width(s) that n_head must divide

    def cross_checks(self) -> list[str]:
        errors = []
        widths = getattr(self, self.width_key)
        if any(w % self.n_head for w in (widths if isinstance(widths, list) else [widths])):
            errors.append(f"key 'n_head' = {self.n_head}: must divide {self.width_key} = {widths}")
        if self.seq_len > self.max_seq_len:
            errors.append(f"key 'seq_len' = {self.seq_len}: must be <= max_seq_len = {self.max_seq_len}")
        if self.eval_interval > self.steps:
            errors.append(f"key 'eval_interval' = {self.eval_interval}: must be <= steps = {self.steps}")
        return errors + _data_problems(self.corpus, self.tokenizer)


@dataclasses.dataclass
class ODEHybridParams(LMParams):
    """Fields and checks of the studies that train the ODE hybrid (a GPT whose consecutive layers ``ode_layers``
    are replaced by one ODE flow block); studies add their solver fields and override defaults. No dropout anywhere:
    the vector field must be a deterministic function of (t, H) for the adjoint, adaptive and reversible solves,
    so the discrete layers go without it too (parity)."""

    n_layer: int = spec(6, ge=1, le=48)
    d_model: int = spec(256, ge=8)
    ode_layers: list[int] = spec([2, 3], ge=0, help="consecutive 0-based layers replaced by one ODE flow block")
    sensitivity: str = spec("direct", choices=SENSITIVITIES,
                            help="gradients: backpropagation through the solver, torchdiffeq's adjoint, or reversible "
                                 "(fixed-grid solvers only)")
    rtol: float = spec(1e-3, gt=0.0, help="dopri5 tolerances")
    atol: float = spec(1e-4, gt=0.0)
    control_dim: int = spec(4, ge=1)
    alpha_init: float = spec(0.1, help="initial value of the learned output scale of the vector field")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        problem = ode_layers_problem(self.ode_layers, self.n_layer)
        return errors + ([f"key 'ode_layers' = {self.ode_layers}: {problem}"] if problem else [])

    def solver_errors(self, solvers: list[str]) -> list[str]:
        """The fixed-grid rule of ``self.sensitivity`` (odebook.nn.ode.solver_problem) for each of ``solvers``."""
        problems = [solver_problem(s, self.sensitivity) for s in solvers]
        return [f"key 'sensitivity' = {self.sensitivity!r}: {pr}" for pr in dict.fromkeys(problems) if pr]

    def model_config(self, vocab_size: int, *, solver: str = "euler", steps: int = 4):
        """The hybrid these parameters describe (odebook.arms.HybridConfig), for ``vocab_size`` tokens."""
        from odebook.arms import HybridConfig

        return HybridConfig(vocab_size=vocab_size, d_model=self.d_model, n_layer=self.n_layer, n_head=self.n_head,
                            max_seq_len=self.max_seq_len, ode_layers=tuple(self.ode_layers), solver=solver,
                            steps=steps, sensitivity=self.sensitivity, rtol=self.rtol, atol=self.atol,
                            control_dim=self.control_dim, alpha_init=self.alpha_init)


@dataclasses.dataclass
class GradientFlowParams(ODEHybridParams):
    """Study 01: a GPT baseline against the same GPT with a block of layers replaced by a neural-ODE flow.

    Defaults are the source's configuration (the t4 profile)."""

    study: ClassVar[str] = "01_gradient_flow"

    n_seeds: int = spec(3, ge=1, le=20, help="independent training runs per model")
    solver: str = spec("euler", choices=SOLVERS)
    ode_steps: int = spec(4, ge=1, le=256, help="fixed-grid steps over t in [0, 1] (ignored by dopri5)")
    control_scales: list[float] = spec([0.0, 0.5, 1.0, 2.0, 4.0], ge=0.0, help="scales for the control check")
    grad_ratio_band: float = spec(10.0, gt=1.0, help="a layer group's gradient norm, hybrid over baseline, must "
                                                     "lie within [1/band, band] (the source's 'no vanishing, no "
                                                     "exploding', made relative)")
    loss_margin: float = spec(0.10, gt=0.0, help="'within 10 % of the baseline': hybrid/baseline test loss < 1 + margin")
    dynamics_sequences: int = spec(2, ge=1, help="held-out sequences of the dynamics analysis")
    dynamics_tokens: int = spec(8, ge=1, help="tokens per sequence of the dynamics analysis (Jacobian (T·d)²)")
    alpha: float = spec(0.05, gt=0.0, le=0.5, help="family-wise significance level (Holm) of the paired tests")

    def cross_checks(self) -> list[str]:
        return super().cross_checks() + self.solver_errors([self.solver])

    def model_config(self, vocab_size: int, **override):
        """Study 01's hybrid: ``solver`` with ``ode_steps`` steps (keyword overrides pass through)."""
        return super().model_config(vocab_size, **{"solver": self.solver, "steps": self.ode_steps, **override})


@dataclasses.dataclass
class ODESolverParams(ODEHybridParams):
    """Study 05: what adjoint sensitivities, integrator choice, reversibility and KV caching buy in memory, speed
    and accuracy, on the study-01 hybrid (a GPT with consecutive layers replaced by one ODE flow block).

    Defaults are the t4 profile: study 01's model with a context long enough for 1024 generated tokens."""

    study: ClassVar[str] = "05_ode_solvers"

    n_seeds: int = spec(3, ge=1, le=20, help="training runs per integrator")
    seq_len: int = spec(128, ge=2, help="training and evaluation context")
    max_seq_len: int = spec(1088, ge=2, help="positional table; must hold prompt + the longest generation")
    integrators: list[str] = spec(list(SOLVERS), choices=SOLVERS)
    nfe_budget: int = spec(8, ge=4, help="vector-field evaluations per forward of every fixed-grid integrator: "
                                         "euler takes nfe_budget steps, midpoint nfe_budget/2, rk4 nfe_budget/4")
    sweep_solver: str = spec("rk4", choices=FIXED_GRID, help="integrator of the sensitivity sweep")
    sweep_steps: list[int] = spec([4, 8, 16, 32], ge=1, help="numbers of steps of the sensitivity sweep")
    sensitivities: list[str] = spec(list(SENSITIVITIES), choices=SENSITIVITIES)
    timing_repeats: int = spec(3, ge=1, help="timed training steps per sweep point (after one warm-up)")
    memory_growth_limit: float = spec(1.2, gt=1.0, help="peak-memory growth over the sweep that counts as O(1)")
    generation_solver: str = spec("rk4", choices=FIXED_GRID, help="the hybrid that generates text")
    generation_lengths: list[int] = spec([256, 1024], ge=1, help="new tokens of the KV-cache speed test")
    prompt_tokens: int = spec(32, ge=1, help="held-out prompt length for generation")
    speedup_target: float = spec(10.0, gt=1.0, help="the source's lower bound for the KV-cache speed-up")
    n_samples: int = spec(2, ge=0)
    sample_tokens: int = spec(100, ge=1)
    temperature: float = spec(0.8, gt=0.0)
    top_k: int = spec(40, ge=1)
    alpha: float = spec(0.05, gt=0.0, le=0.5, help="significance level of the verdicts")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if any(s in self.integrators for s in FIXED_GRID) and self.nfe_budget % 4:
            errors.append(f"key 'nfe_budget' = {self.nfe_budget}: must be a multiple of 4 (rk4 has 4 stages, "
                          "midpoint 2)")
        if self.generation_solver not in self.integrators:
            errors.append(f"key 'generation_solver' = {self.generation_solver!r}: must be one of integrators = "
                          f"{self.integrators}")
        if "direct" not in self.sensitivities:
            errors.append(f"key 'sensitivities' = {self.sensitivities}: must include 'direct' (the reference)")
        if len(set(self.sweep_steps)) < 2:
            errors.append(f"key 'sweep_steps' = {self.sweep_steps}: needs at least two different step counts")
        errors += self.solver_errors(self.integrators)
        longest = self.prompt_tokens + max(self.generation_lengths + [self.sample_tokens])
        if longest > self.max_seq_len:
            errors.append(f"key 'max_seq_len' = {self.max_seq_len}: generation needs prompt_tokens + the longest "
                          f"generation = {longest} positions")
        return errors


TIME_INDEXED_MODELS = ("standard", "tong", "ti_mlp", "ti_mlp_full", "ti_ssm", "ti_mlp_constant", "ti_mlp_dt",
                       "ode_shared")


@dataclasses.dataclass
class TimeIndexedParams(LMParams):
    """Study 02: full time-dependent weights (Tong et al.) vs shared weights modulated by depth vs a transformer.

    Defaults are the source's configuration (the t4 profile)."""

    study: ClassVar[str] = "02_time_indexed"

    n_seeds: int = spec(5, ge=1, le=20, help="independent training runs per model")
    models: list[str] = spec(list(TIME_INDEXED_MODELS), choices=TIME_INDEXED_MODELS,
                             help="which models to train; the verdicts need standard, tong, ti_mlp, ti_mlp_constant, "
                                  "ti_mlp_dt")
    tokenizer: str = spec("bytes", choices=("gpt2", "bytes"))
    d_model: int = spec(256, ge=8)
    n_layer: int = spec(6, ge=1, le=48, help="layers of the standard transformer = depth steps of the others")
    seq_len: int = spec(128, ge=2, help="training and evaluation context")
    max_seq_len: int = spec(128, ge=2, help="size of the positional embedding")
    batch_size: int = spec(8, ge=1)
    steps: int = spec(1000, ge=1)
    weight_decay: float = spec(0.0, ge=0.0, help="0 = Adam, as the source")
    eval_interval: int = spec(100, ge=1)
    n_freq: int = spec(16, ge=1, help="S: frequencies of the sinusoidal depth embedding")
    d_emb: int = spec(32, ge=1, help="width of Tong's time embedding")
    gate_width: int = spec(32, ge=1, help="hidden width of the gate MLPs")
    d_state: int = spec(16, ge=1, help="state size N of the SSM")
    rediscretize: list[int] = spec([3, 12], ge=1, help="depth steps at which ODE-style models are re-evaluated")
    norm: str = spec("static", choices=NORMS, help="LayerNorms of the gated models: static (default), or temporal "
                                                   "as the source's time-indexed MLP")
    tong_time_mlp: str = spec("shared", choices=TIME_MLPS, help="Tong's block: one time MLP for all generators "
                                                                "(default), or one per linear as Tong's code")
    lr_grid: list[float] = spec([3e-4, 1e-3, 3e-3], gt=0.0, le=1.0,
                                help="learning rates tried per model on the first seed; the lowest final validation "
                                     "loss chooses (lr is not used)")
    compression_target: float = spec(3.0, gt=1.0, help="'far fewer parameters': block parameters of the standard "
                                                       "transformer over the model's, at least this")
    dynamics_sequences: int = spec(2, ge=1, help="held-out sequences of the dynamics analysis")
    dynamics_tokens: int = spec(8, ge=1, help="tokens per sequence of the dynamics analysis")
    alpha: float = spec(0.05, gt=0.0, le=0.5, help="family-wise significance level (Holm) of the verdicts")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if len(set(self.models)) != len(self.models) or not self.models:
            errors.append(f"key 'models' = {self.models}: must name each model at most once, at least one")
        if len(set(self.lr_grid)) != len(self.lr_grid) or not self.lr_grid:
            errors.append(f"key 'lr_grid' = {self.lr_grid}: must name each rate at most once, at least one")
        return errors

    def model_config(self, vocab_size: int) -> dict:
        """Keyword arguments of odebook.models.time_indexed(name, **config) for every model of this study."""
        return dict(vocab_size=vocab_size, d_model=self.d_model, n_head=self.n_head, n_layer=self.n_layer,
                    max_seq_len=self.max_seq_len, n_freq=self.n_freq, d_emb=self.d_emb, gate_width=self.gate_width,
                    d_state=self.d_state, norm=self.norm, tong_time_mlp=self.tong_time_mlp)


def _niah_length_problems(ks: list[int], curriculum: list[int], tokenizer: str, max_seq_len: int) -> list[str]:
    """The longest retrieval prompt must fit the positional table."""
    from odebook.data import DataError, get_tokenizer
    from odebook.tasks import max_prompt_tokens

    try:
        longest = max_prompt_tokens(max(ks), max(curriculum), get_tokenizer(tokenizer))
    except DataError:
        return []  # reported by the data check already
    if longest <= max_seq_len:
        return []
    return [f"key 'max_seq_len' = {max_seq_len}: retrieval prompts with {max(ks)} bindings and {max(curriculum)} "
            f"filler sentences can reach {longest} {tokenizer} tokens"]


@dataclasses.dataclass
class RetrievalParams(LMParams):
    """Fields and checks of the studies that also train on the binding-retrieval task (odebook.tasks)."""

    n_seeds: int = spec(3, ge=1, le=20, help="training runs per configuration; verdicts use intervals across them")
    seq_len: int = spec(256, ge=2, help="language-model context")
    max_seq_len: int = spec(1024, ge=2, help="positional table; must hold the longest retrieval prompt")
    batch_size: int = spec(16, ge=1)
    steps: int = spec(1000, ge=1)
    lr: float = spec(1e-3, gt=0.0, le=1.0)
    eval_interval: int = spec(100, ge=1)
    window: int = spec(64, ge=1, help="sliding-window length; distances are binned relative to it")
    chunk_size: int = spec(64, ge=1, help="chunk of the pure-PyTorch gated delta rule (CPU path; CUDA uses fla-core)")
    ks: list[int] = spec([2, 4], ge=1, le=8, help="bindings per prompt: drawn from these in training, each scored")
    curriculum: list[int] = spec([0, 10, 30, 50, 100], ge=0, help="filler sentences per stage, growing over training")
    niah_eval_examples: int = spec(500, ge=1, help="examples per evaluation set")
    eval_seed: int = spec(10_000, ge=0, help="seed of the evaluation examples, apart from training seeds")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if max(self.ks) > 8:
            errors.append(f"key 'ks' = {self.ks}: at most 8 bindings (distinct colours)")
        return errors + ([] if errors else _niah_length_problems(self.ks, self.curriculum, self.tokenizer,
                                                                 self.max_seq_len))

    def model_config(self, pattern: str, *, d_model: int, **overrides) -> dict:
        """Keyword arguments of odebook.models.pattern_lm for ``pattern`` at width ``d_model``."""
        from odebook.data import get_tokenizer

        return {"pattern": pattern, "vocab_size": get_tokenizer(self.tokenizer).vocab_size, "d_model": d_model,
                "n_head": self.n_head, "max_seq_len": self.max_seq_len, "window": self.window,
                "chunk_size": self.chunk_size, **overrides}


SERIES = {"hybrid": lambda layers: "G" * layers + "S", "gdn": lambda layers: "G" * layers}


@dataclasses.dataclass
class GDNScalingParams(RetrievalParams):
    """Study 03: how many bindings does a Gated DeltaNet state hold, and how does the hybrid's loss scale with size?

    Defaults are the source's configuration (the t4 profile): its "1M", "10M" and "125M" ladder of d 128/256/512
    with 1/2/4 GDN layers. ``steps`` and ``batch_size`` are the language-model ladder's."""

    study: ClassVar[str] = "03_gdn_scaling"
    width_key: ClassVar[str] = "ladder_d"

    ladder_d: list[int] = spec([128, 256, 512], ge=8, help="model widths of the size ladder")
    ladder_layers: list[int] = spec([1, 2, 4], ge=1, help="GDN layers at each width")
    series: list[str] = spec(["hybrid", "gdn"], choices=tuple(SERIES),
                             help="hybrid: the GDN layers then a state-reading SWA layer (the source's question); "
                                  "gdn: GDN layers only")
    lr_grid: list[float] = spec([3e-4, 1e-3, 3e-3], gt=0.0, le=1.0,
                                help="language-model learning rates tried per size (first seed, validation split)")
    steps: int = spec(1000, ge=1, help="language-model training steps per size")
    niah_sizes: list[int] = spec([0, 1, 2], ge=0, help="ladder indices whose GDN-only stack is trained on retrieval")
    niah_steps: int = spec(1500, ge=1, help="retrieval training steps per size, over the whole curriculum")
    niah_batch_size: int = spec(16, ge=1)

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if len(self.ladder_d) != len(self.ladder_layers):
            errors.append(f"keys 'ladder_d' = {self.ladder_d} and 'ladder_layers' = {self.ladder_layers}: "
                          "must have the same length")
        if len(self.ladder_d) < 3:
            errors.append(f"key 'ladder_d' = {self.ladder_d}: needs at least 3 sizes (the power law has 3 parameters)")
        sizes = list(zip(self.ladder_d, self.ladder_layers))
        if len(set(sizes)) != len(sizes):
            errors.append(f"keys 'ladder_d' = {self.ladder_d} and 'ladder_layers' = {self.ladder_layers}: each size "
                          "(width, layers) at most once")
        if any(i >= len(self.ladder_d) for i in self.niah_sizes):
            errors.append(f"key 'niah_sizes' = {self.niah_sizes}: indices into ladder_d (0..{len(self.ladder_d) - 1})")
        return errors

    def size_config(self, i: int, series: str) -> dict:
        """pattern_lm keyword arguments of ladder size ``i`` in ``series``."""
        return self.model_config(SERIES[series](self.ladder_layers[i]), d_model=self.ladder_d[i],
                                 state_read=series == "hybrid", local_path="none")


@dataclasses.dataclass
class MixedTrainingParams(RetrievalParams):
    """Study 04: what makes a GDN + sliding-window hybrid use its GDN state — bottleneck × training regime.

    Defaults are the source's configuration (the t4 profile)."""

    study: ClassVar[str] = "04_mixed_training"

    corpus: str = spec("tinystories", choices=("tinystories",), help="the language-model corpus (checked before compute)")
    pattern: str = spec("GGGGGS", help="G = Gated DeltaNet, S = sliding-window attention reading the GDN state")
    d_model: int = spec(256, ge=8)
    seq_len: int = spec(256, ge=2, help="tokens per story (longer stories are cut)")
    steps: int = spec(1000, ge=1, help="the same step budget for every run")
    bottlenecks: list[str] = spec(["static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted"],
                                  choices=("static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted", "none"),
                                  help="local path arms (odebook.nn.hybrid.LOCAL_PATHS)")
    regimes: list[str] = spec(["lm", "niah", "mixed"], choices=("lm", "niah", "mixed"))
    control: bool = spec(True, help="also train the no-state control (every G layer replaced by plain SWA)")
    max_train_stories: int = spec(50_000, ge=1)
    ppl_target: float = spec(5.0, gt=1.0, help="the source's target for held-out perplexity")
    delta_target: float = spec(0.15, ge=0.0, le=1.0, help="the source's target for Delta (15 points)")
    n_samples: int = spec(3, ge=0)
    sample_tokens: int = spec(120, ge=1)
    temperature: float = spec(0.8, ge=0.0, help="sampling temperature of the samples (0: greedy)")
    top_k: int = spec(40, ge=1, help="sample from the top k tokens")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if not self.pattern or set(self.pattern) - {"G", "S"} or self.pattern[0] != "G":
            errors.append(f"key 'pattern' = {self.pattern!r}: letters G and S, starting with G")
        return errors

    def arm_config(self, arm: str) -> dict:
        """pattern_lm keyword arguments of a bottleneck arm, or of the no-state control ('control')."""
        if arm == "control":
            return self.model_config(self.pattern.replace("G", "S"), d_model=self.d_model)
        return self.model_config(self.pattern, d_model=self.d_model, state_read=True, local_path=arm)


STUDIES: dict[str, type[Params]] = {cls.study: cls for cls in (GradientFlowParams, TimeIndexedParams,
                                                               GDNScalingParams, MixedTrainingParams,
                                                               ODESolverParams)}


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark.line)
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if first != key_node.start_mark.line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' is given twice (lines {first + 1} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a profile's parameter file: a YAML mapping (an empty file is an empty mapping), no key twice."""
    path = Path(path)
    if not path.is_file():
        raise ParamError(f"{path}: parameter file not found")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    except UnicodeDecodeError as err:
        raise ParamError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ParamError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamError(f"{path}: must be a mapping of parameter names to values, got {type(data).__name__}")
    return data


def validate_values(study: str, path: str | Path) -> tuple[Params, dict[str, Any]]:
    """The one check of a profile's YAML file for ``study``: its schema's parameters and the file's own values
    (the overrides papermill injects)."""
    if study not in STUDIES:
        raise ParamError(f"{path}: no parameter schema for study '{study}' in odebook.params.STUDIES; known: "
                         f"{', '.join(STUDIES)}")
    values = load_yaml(path)
    return STUDIES[study].from_mapping(values, source=str(path)), values


def validate_file(study: str, path: str | Path) -> Params:
    """Validate a profile's YAML file for ``study`` against its schema (and the notebook's defaults)."""
    return validate_values(study, path)[0]

