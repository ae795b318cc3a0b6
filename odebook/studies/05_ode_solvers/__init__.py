"""Study 05 · ODE solvers: what adjoint sensitivities, integrator choice, reversibility and KV caching buy in memory,
speed and accuracy, on study 01's hybrid (``notebooks/05_ode_solvers.py``). ``params``: the parameters and arms;
``analysis``: the integrators' tables and the step-time claim; ``curvature``: the work–precision reading
across curvature; ``measure``: the measurements of ODE-block variants;
``generation``: generation with and without the KV cache; ``figures``; ``data`` and ``plan``: what the notebook
loads and runs (odebook.study.plan)."""

from . import analysis, curvature, figures, generation, measure
from .params import ODESolverParams as Params
from .plan import data, plan

__all__ = ["Params", "analysis", "curvature", "figures", "generation", "measure", "data", "plan"]
