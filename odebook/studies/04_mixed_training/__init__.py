"""Study 04 · Mixed training: in a GDN + sliding-window hybrid, what makes the model use its GDN state — the local
path's bottleneck × the training regime (``notebooks/04_mixed_training.py``)? ``params``: the parameters and arms;
``analysis``: the design, its declared claims, the values they read, the tuning rule's outcome and the models
table; ``vocabulary``: the tokens its models know; ``output_drop``: the dropped-output arm; ``figures``; ``data``
and ``plan``: what the notebook loads and runs (odebook.study.plan)."""

from . import analysis, figures, output_drop, vocabulary
from .params import MixedTrainingParams as Params
from .plan import data, plan

__all__ = ["Params", "analysis", "figures", "output_drop", "vocabulary", "data", "plan"]
