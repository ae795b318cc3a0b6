"""Study 03 · Gated DeltaNet scaling: how many bindings does a GDN state hold, and how does the hybrid's held-out loss
scale with size (``notebooks/03_gdn_scaling.py``)? ``params``: the parameters and arms; ``capacity``: MQAR's binding
claims, tables and controls; ``colours``: the name-colour runs and claims; ``scaling``: the ladder, its fits and
go/no-go; ``figures``."""

from . import capacity, colours, figures, scaling
from .params import GDNScalingParams as Params

__all__ = ["Params", "capacity", "colours", "figures", "scaling"]
