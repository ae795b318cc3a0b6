"""The bottleneck arms of a GDN + sliding-window hybrid: how the hybrid's state-reading layer scales its local
(sliding-window) path, as a typed mapping — a notebook asks an arm what it is (``static``, ``source_drop``) instead of
parsing its name."""

from __future__ import annotations

import dataclasses

__all__ = ["LocalPath", "LOCAL_PATHS"]


@dataclasses.dataclass(frozen=True)
class LocalPath:
    """The local multiplier m of odebook.nn.state_read.StateReadAttention: ``scale`` at inference, and in training
    either the same static scale or, with ``drop_prob`` > 0, a per-sequence keep mask (kept sequences at 1, or at
    1/(1 − p) when ``inverted``). ``as_source``: the source ran this arm as it stands here."""

    scale: float
    drop_prob: float
    inverted: bool
    as_source: bool

    @property
    def static(self) -> bool:
        """A fixed bottleneck: the local path scaled below 1 in training and inference alike."""
        return self.drop_prob == 0 and self.scale < 1

    @property
    def source_drop(self) -> bool:
        """The source's stochastic local drop (dropped in training, scaled at inference)."""
        return self.drop_prob > 0 and self.as_source

    def layer_options(self) -> dict:
        """The keyword arguments of StateReadAttention that make this path."""
        return {"local_scale": self.scale, "local_drop_prob": self.drop_prob, "inverted": self.inverted}


LOCAL_PATHS: dict[str, LocalPath] = {
    "static_0.3": LocalPath(scale=0.3, drop_prob=0.0, inverted=False, as_source=True),
    "static_0.1": LocalPath(scale=0.1, drop_prob=0.0, inverted=False, as_source=True),
    "drop_0.7": LocalPath(scale=0.3, drop_prob=0.7, inverted=False, as_source=True),  # drop in training, 0.3 after
    "drop_0.7_inverted": LocalPath(scale=1.0, drop_prob=0.7, inverted=True, as_source=False),  # not the source's
    "none": LocalPath(scale=1.0, drop_prob=0.0, inverted=False, as_source=False),  # no bottleneck
}
