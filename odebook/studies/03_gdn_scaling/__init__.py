"""Study 03 · Gated DeltaNet scaling: how many bindings does a GDN state hold, and how does the hybrid's held-out loss
scale with size (``notebooks/03_gdn_scaling.py``)? ``params``: the parameters and arms; ``capacity``: MQAR's binding
claims, tables and controls; ``colours``: the name-colour runs and claims; ``scaling``: the ladder, its fits and
go/no-go; ``no_state``: the no-state control (the GDN stack with its state emptied before every write);
``restarts``: the MQAR runs' restart rule; ``figures``; ``data`` and ``plan``: what the notebook loads and runs
(odebook.study.plan)."""

from . import capacity, colours, figures, no_state, restarts, scaling
from .params import GDNScalingParams as Params
from .plan import data, plan

__all__ = ["Params", "capacity", "colours", "figures", "no_state", "restarts", "scaling", "data", "plan"]
