"""Study 01 · Gradient flow: can a neural-ODE flow block replace transformer layers without hurting gradient flow or
loss (``notebooks/01_gradient_flow.py``)? ``params``: the parameters; ``arms``: the baseline, the hybrid and their
controls; ``analysis``: the claims around a calibrated null and the numbers they rest on; ``figures``; ``data`` and
``plan``: what the notebook loads and runs (odebook.study.plan)."""

from . import analysis, arms, figures
from .params import GradientFlowParams as Params
from .plan import data, plan

__all__ = ["Params", "analysis", "arms", "figures", "data", "plan"]
