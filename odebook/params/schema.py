"""The machinery of strict, typed parameters: a field with its constraints (``spec``), the conversion and bound
checks of each value, the ``Params`` base every study's schema derives from, the papermill cell it reads, and the
YAML loader that refuses a key given twice. Every problem is one line of one ``ParamError``."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml

from odebook.params.cell import cell_groups, cell_values, injected_names
from odebook.params.folders import written_folder_problem
from odebook.params.seeds import SeedPlan, looks_problem

__all__ = ["ParamError", "Params", "spec", "INT_LIMIT", "load_yaml", "yaml_mapping"]

INT_LIMIT = 2**32 - 1  # every integer parameter stays within numpy's seed range (seeds are the largest integers)


class ParamError(ValueError):
    """Invalid parameters: the message names the source, every offending key and what is allowed."""


def spec(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
         choices: tuple | None = None, min_len: int = 1, path: bool | str = False, operational: bool = False,
         machine: bool = False, help: str = "") -> Any:
    """A dataclass field with bounds (``ge``/``gt``/``le``) or allowed ``choices``; a list needs at least
    ``min_len`` entries and each entry is held to the bounds; lists get a fresh copy. A ``path`` is empty or
    absolute (``~`` expanded): the one rule for every file and folder a parameter names; ``path="writes"`` marks a
    folder the study writes into, which must also lie outside the checkout's source and the system's folders.
    ``operational``: the field changes where outputs go, which seeds run, logging, checkpoint cadence or where the
    runs execute, but not one number of a run (odebook.training.fingerprint.arithmetic leaves it out).
    ``machine``: a setting of the machine and the run rather than of the study (device, executor, checkpoints,
    outputs), the same for every study: declared once, on a base class; set by a profile file, the runner or
    papermill's ``-p`` and never restated in a notebook's parameters cell (``Params.cell_fields``)."""
    return _field(default, {"ge": ge, "gt": gt, "le": le, "choices": choices, "min_len": min_len, "path": path,
                            "operational": operational, "machine": machine, "help": help})


def _field(default: Any, meta: dict[str, Any]) -> Any:
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


SLURM_NAME = re.compile(r"[A-Za-z0-9_.\-]*(,[A-Za-z0-9_.\-]+)*")  # a partition, or a list of them
SLURM_ONLY = ("slurm_partition", "slurm_gpus_per_job", "slurm_array_parallelism")
EXECUTOR_KEYS = ("executor_folder", "slurm_time_min", *SLURM_ONLY)  # what submitit alone reads


def _check_bounds(value: Any, meta: Mapping[str, Any]) -> str | None:
    if isinstance(value, list) and len(value) < meta["min_len"]:
        return f"needs at least {meta['min_len']} {'entry' if meta['min_len'] == 1 else 'entries'}"
    items = value if isinstance(value, list) else [value]
    if meta.get("path") and value and not Path(value).expanduser().is_absolute():
        return "must be an absolute path (notebooks run in their own folder, so a relative path is ambiguous)"
    if meta.get("path") == "writes" and value:
        problem = written_folder_problem(Path(value).expanduser().resolve())
        if problem:
            return problem
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
    """Fields every study has. Subclasses add their own fields, override ``cross_checks``, and change inherited
    defaults through ``defaults`` — the field's type, bounds and help stay where it is declared."""

    study: ClassVar[str] = ""  # a study's name: its package's under odebook/studies/ (``__init_subclass__``)
    defaults: ClassVar[Mapping[str, Any]] = {}
    groups: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # the parameters cell's dicts, with the classes' above

    def __init_subclass__(cls, **kwargs):
        """Name a study's parameters by their package (odebook/studies/<NN_name>/), and turn ``defaults = {name:
        value}`` into fields that differ from the inherited ones only in their default (applied before @dataclass
        collects the class's fields)."""
        super().__init_subclass__(**kwargs)
        package = cls.__module__.split(".")
        if package[:2] == ["odebook", "studies"] and len(package) > 2 and "study" not in cls.__dict__:
            cls.study = package[2]
        changes = cls.__dict__.get("defaults", {})
        if not changes:
            return
        parent = next(b for b in cls.__mro__[1:] if dataclasses.is_dataclass(b))
        inherited, hints = {f.name: f for f in dataclasses.fields(parent)}, typing.get_type_hints(parent)
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        for name, value in changes.items():
            if name not in inherited:
                raise TypeError(f"{cls.__name__}.defaults names '{name}', which {parent.__name__} does not have")
            annotations[name] = hints[name]
            setattr(cls, name, _field(value, dict(inherited[name].metadata)))
        cls.__annotations__ = annotations

    seed: int = spec(0, ge=0, operational=True, help="first seed; seed i of n_seeds is seed + i")
    n_seeds: int = spec(1, ge=1, le=20, operational=True,
                        help="independent training runs per model (the cap of the looks)")
    looks: list[int] = spec([], ge=2, min_len=0, operational=True,
                            help="interim looks: seed counts below n_seeds at which the primary claims are examined "
                                 "and the study stops once they are settled (study.looks); [] = n_seeds at once")
    tuning_seeds: int = spec(1, ge=1, le=5, operational=True,
                             help="seeds past the last confirmatory one that every learning-rate grid trains on; the "
                                  "lowest mean validation loss over them chooses (study.experiment.tune_lr)")
    device: str = spec("auto", choices=("auto", "cpu", "cuda"), machine=True, help="auto = cuda when available")
    output_dir: str = spec("", path="writes", operational=True, machine=True,
                           help="where figures and results go; '' = outputs/interactive/<study>; the runner sets it "
                                "(a profile file may not)")
    executor: str = spec("auto", choices=("auto", "local", "workers", "submitit"), operational=True, machine=True,
                         help="where the study's independent runs go (odebook.training.executor): 'local' = this "
                              "process (one per GPU on a machine with several); 'workers' = side by side in one-thread "
                              "worker processes, one per usable core; 'auto' = workers on a CPU with several cores for "
                              "runs of at least 100 steps, else local; 'submitit' = one job array per look, on SLURM "
                              "where sbatch is found, else subprocesses of this machine")
    executor_folder: str = spec("", path="writes", operational=True, machine=True,
                                help="submitit: a folder every node sees, for the jobs' pickles and logs; '' = "
                                     "<checkpoint folder>/jobs")
    slurm_partition: str = spec("", operational=True, machine=True,
                                help="submitit on SLURM: the partition; '' = the cluster's default")
    slurm_time_min: int = spec(120, ge=1, operational=True, machine=True,
                               help="submitit: each job's time limit in minutes")
    slurm_gpus_per_job: int = spec(0, ge=0, operational=True, machine=True,
                                   help="submitit on SLURM: GPUs per job (one run each); 0 = none asked, for a CPU "
                                        "partition")
    slurm_array_parallelism: int = spec(16, ge=1, operational=True, machine=True,
                                        help="submitit: jobs of one array running at once")

    # -- construction ---------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str, problems: list[str] = ()) -> "Params":
        """Validate ``values`` (all keys must be fields) and return the parameters, or raise one ParamError (with
        ``problems`` found before, e.g. in the parameters cell's groups)."""
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in dataclasses.fields(cls)}
        errors: list[str] = list(problems)
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
        """Read this study's fields from a notebook's globals (its parameters cell and its groups, odebook.params.cell)
        and validate them. A name that papermill injected (``papermill -p NAME VALUE``) but the schema does not know
        is an unknown key, as in a YAML file: papermill itself only warns. The injected cell is found in IPython's
        input history (``In``)."""
        values, problems = cell_values(cls, namespace)
        injected = injected_names(namespace.get("In", ()))
        values.update({k: namespace.get(k) for k in injected - values.keys() - cell_groups(cls).keys()})
        return cls.from_mapping(values, source if not injected else "papermill parameters (-p/-f)", problems)

    def _generic_checks(self) -> list[str]:
        """Rules every study shares: all seeds within numpy's range, and a device that exists."""
        errors = []
        if self.seed + self.n_seeds + self.tuning_seeds - 1 > INT_LIMIT:  # the largest seed: SeedPlan.tuning's last
            errors.append(f"key 'seed' = {self.seed}: seed + n_seeds + tuning_seeds - 1 (the last tuning seed) must "
                          f"be <= {INT_LIMIT} (numpy's seed range)")
        problem = looks_problem(self.looks, self.n_seeds)
        if problem:
            errors.append(f"key 'looks' = {list(self.looks)}: {problem}")
        if not SLURM_NAME.fullmatch(self.slurm_partition):  # it reaches the batch script sbatch reads, verbatim
            errors.append(f"key 'slurm_partition' = {self.slurm_partition!r}: a SLURM partition name (letters, digits, "
                          "'_', '-', '.', ',' between names; no whitespace, quotes or newlines)")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                errors.append("key 'device' = 'cuda': this machine has no CUDA device; use 'auto' or 'cpu'")
        return errors

    def cross_checks(self) -> list[str]:
        """Constraints between fields, and data availability; each problem as one line."""
        return []

    def ignored_keys(self) -> str:
        """One line naming the executor keys set to other than their defaults that cannot apply to the executor
        chosen here (submitit's keys under any other executor; SLURM's where no ``sbatch`` is found), else ""."""
        import shutil

        here = self.executor != "submitit"
        names = EXECUTOR_KEYS if here else SLURM_ONLY if shutil.which("sbatch") is None else ()
        fields = {f.name: f for f in dataclasses.fields(self)}
        changed = [k for k in names if getattr(self, k) != fields[k].default]
        if not changed:
            return ""
        why = (f"with executor: {self.executor} (set executor: submitit to use them)" if here else
               "here: no sbatch is found, so submitit runs the jobs as subprocesses of this machine")
        return f"warning: {', '.join(changed)} ignored {why}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def seed_plan(self) -> SeedPlan:
        """The study's seeds: confirmatory, looks and tuning seeds (odebook.params.seeds)."""
        return SeedPlan(self.seed, self.n_seeds, self.looks, self.tuning_seeds)

    @classmethod
    def cell_fields(cls) -> tuple[str, ...]:
        """The settings a notebook's parameters cell holds: the study's own, not the machine's (``spec(machine=)``)."""
        return tuple(f.name for f in dataclasses.fields(cls) if not f.metadata.get("machine"))

    @classmethod
    def describe(cls) -> str:
        """A table of keys, types, defaults and constraints, for error messages and the README."""
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append(f"{f.name}: {_type_name(hints[f.name])}, default {default!r}. {f.metadata.get('help', '')}")
        return "\n".join(rows)


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
    """Read a profile's parameter file: a YAML mapping, no key twice; an empty file is refused (``{}`` says "the
    notebook's own defaults" on purpose)."""
    path = Path(path)
    if not path.is_file():
        raise ParamError(f"{path}: parameter file not found")
    return yaml_mapping(path.read_bytes(), source=str(path))


def yaml_mapping(data: bytes, *, source: str) -> dict[str, Any]:
    """A parameter file's bytes as a mapping (see ``load_yaml``); ``source`` names the file or address in errors."""
    try:
        mapping = yaml.load(data.decode("utf-8"), Loader=_StrictLoader)
    except UnicodeDecodeError as err:
        raise ParamError(f"{source}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ParamError(f"{source}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(mapping, dict | None):
        raise ParamError(f"{source}: must be a mapping of parameter names to values, got {type(mapping).__name__}")
    if mapping is None:
        raise ParamError(f"{source}: holds no parameters; an empty file would run the notebook's own defaults (the t4 "
                         "profile's scale: hours on a CPU). Write the keys you mean to set, e.g. starting from a copy "
                         "of params/smoke/, or {} to run the defaults on purpose (as params/t4/ does)")
    return mapping
