"""Study 04 · Mixed training: in a GDN + sliding-window hybrid, what makes the model use its GDN state — the local
path's bottleneck × the training regime (``notebooks/04_mixed_training.py``)? ``params``: the parameters and arms;
``analysis``: the design, its declared claims, the values they read and the models table; ``figures``."""

from . import analysis, figures
from .params import MixedTrainingParams as Params

__all__ = ["Params", "analysis", "figures"]
