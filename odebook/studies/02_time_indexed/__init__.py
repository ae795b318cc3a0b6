"""Study 02 · Time-indexed parameter sharing: full time-dependent weights (Tong et al.) against shared weights modulated
by depth, a time-indexed SSM and a plain transformer (``notebooks/02_time_indexed.py``). ``params``: the parameters;
``arms``: each arm, what it is and how it is built; ``analysis``: the declared claims, the learning-rate rule and the
numbers the claims read; ``figures``; ``data`` and ``plan``: what the notebook loads and runs (odebook.study.plan)."""

from . import analysis, arms, figures
from .params import TimeIndexedParams as Params
from .plan import data, plan

__all__ = ["Params", "analysis", "arms", "figures", "data", "plan"]
