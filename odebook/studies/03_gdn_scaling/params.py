"""Study 03's parameters: the language-model ladder, the retrieval runs on the curriculum, and MQAR's capacity arms."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from odebook.models.configs import PatternConfig
from odebook.params.retrieval import RetrievalParams
from odebook.params.schema import spec

__all__ = ["GDNScalingParams", "SERIES", "MQAR_KINDS"]


SERIES = {"hybrid": lambda layers: "G" * layers + "S", "gdn": lambda layers: "G" * layers}


# Study 03's MQAR stacks, one letter a layer (odebook.models.lm.pattern_lm): GDN layers; the no-state control, the same
# GDN layers with the state emptied before every write (no_state.NoStateConfig); the positive control, full attention
# behind the GDN's short convolution.
MQAR_KINDS = {"gdn": "G", "no state": "G", "attention": "C"}


@dataclasses.dataclass
class GDNScalingParams(RetrievalParams):
    """Study 03: how many bindings does a Gated DeltaNet state hold, and how does the hybrid's loss scale with size?

    Defaults are the source's configuration (the t4 profile): its "1M", "10M" and "125M" ladder of d 128/256/512
    with 1/2/4 GDN layers. ``steps`` and ``batch_size`` are the language-model ladder's."""

    width_key: ClassVar[str] = "ladder_d"
    defaults: ClassVar = {"tuning_seeds": 2}
    groups: ClassVar = {
        "lm_ladder": ("ladder_d", "ladder_layers", "series", "lr_grid"),
        "retrieval_task": ("retrieval_sizes", "retrieval_steps"),
        "mqar_capacity": ("mqar_keys", "mqar_width", "mqar_heads", "mqar_layers", "mqar_train_ks", "mqar_eval_ks",
                          "mqar_seq_len", "mqar_batch_size", "mqar_steps", "mqar_lr_grid", "mqar_lr_extensions",
                          "mqar_power_a", "mqar_eval_batches", "mqar_margin", "mqar_restarts")}

    ladder_d: list[int] = spec([128, 256, 512], ge=8, help="model widths of the size ladder")
    ladder_layers: list[int] = spec([1, 2, 4], ge=1, help="GDN layers at each width")
    series: list[str] = spec(["hybrid", "gdn"], choices=tuple(SERIES), min_len=0,
                             help="hybrid: the GDN layers then a state-reading SWA layer (the source's question); "
                                  "gdn: GDN layers only; none: the ladder is not run (a machine that cannot train "
                                  "one its go/no-go can read)")
    lr_grid: list[float] = spec([3e-4, 1e-3, 3e-3], gt=0.0, le=1.0,
                                help="language-model learning rates tried per size (first seed, validation split)")
    retrieval_sizes: list[int] = spec([0, 1, 2], ge=0,
                                      help="ladder indices whose GDN-only stack is trained on retrieval")
    retrieval_steps: int = spec(1500, ge=1, help="retrieval training steps per size, over the whole curriculum")
    mqar_keys: int = spec(64, ge=4, help="MQAR (odebook.data.mqar): keys, and as many values, in its own vocabulary")
    mqar_width: int = spec(128, ge=8, help="MQAR: the width of every stack")
    mqar_heads: list[int] = spec([8, 2], ge=1, min_len=2,
                                 help="MQAR: heads of the GDN stacks and their no-state controls, most first — a "
                                      "layer's state holds width² / heads numbers, so fewer heads is a larger state "
                                      "with longer keys (width / heads dimensions) on projections of the same shapes")
    mqar_layers: int = spec(2, ge=1, help="MQAR: layers of every stack, the no-state control's included")
    mqar_train_ks: list[int] = spec([4, 8, 16, 32, 64], ge=1, help="MQAR: pairs per sequence in training, in turn")
    mqar_eval_ks: list[int] = spec([4, 8, 16, 32, 64], ge=1, min_len=2,
                                   help="MQAR: pairs per sequence scored, increasing: the accuracy curve")
    mqar_seq_len: int = spec(256, ge=8, help="MQAR: tokens per sequence")
    mqar_batch_size: int = spec(64, ge=1)
    mqar_steps: int = spec(3000, ge=1)
    mqar_lr_grid: list[float] = spec([3e-4, 1e-3, 3e-3, 1e-2], gt=0.0, le=1.0, min_len=2,
                                     help="MQAR: learning rates tried per arm on a tuning seed apart (Zoology tries 4)")
    mqar_lr_extensions: int = spec(1, ge=0, le=4, help="MQAR: times an arm's grid is extended one step past the edge "
                                                       "it chose (odebook.study.lr_grid)")
    mqar_power_a: float = spec(0.1, gt=0.0, le=1.0, help="MQAR: the query gaps' power law (smaller: nearer queries)")
    mqar_eval_batches: int = spec(8, ge=1, help="MQAR: evaluation batches per k")
    mqar_margin: float = spec(0.1, gt=0.0, le=1.0, help="MQAR claims: the smallest accuracy difference of interest")
    mqar_restarts: int = spec(2, ge=0, le=4, help="MQAR: times a confirmatory run that fails its arm's learned gate on "
                                                  "validation data trains again from a fresh initialisation (restarts)")

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
        if any(i >= len(self.ladder_d) for i in self.retrieval_sizes):
            errors.append(f"key 'retrieval_sizes' = {self.retrieval_sizes}: indices into ladder_d "
                          f"(0..{len(self.ladder_d) - 1})")
        if any(b <= a for a, b in zip(self.mqar_eval_ks, self.mqar_eval_ks[1:])):
            errors.append(f"key 'mqar_eval_ks' = {self.mqar_eval_ks}: must increase")
        if any(b >= a for a, b in zip(self.mqar_heads, self.mqar_heads[1:])):
            errors.append(f"key 'mqar_heads' = {self.mqar_heads}: must decrease (the smallest state first)")
        if any(self.mqar_width % h for h in (*self.mqar_heads, self.n_head)):
            errors.append(f"key 'mqar_width' = {self.mqar_width}: every head count of mqar_heads = {self.mqar_heads} "
                          f"and n_head = {self.n_head} must divide it")
        longest = max(self.mqar_train_ks + self.mqar_eval_ks)
        if longest > self.mqar_keys:
            errors.append(f"key 'mqar_keys' = {self.mqar_keys}: fewer keys than the {longest} pairs of mqar_*_ks")
        if 4 * longest > self.mqar_seq_len + 1:
            errors.append(f"key 'mqar_seq_len' = {self.mqar_seq_len}: {longest} pairs and their queries need "
                          f"{4 * longest - 1} tokens")
        return errors

    def mqar_config(self, heads: int, kind: str = "gdn") -> PatternConfig:
        """An MQAR stack of ``mqar_layers`` layers at ``mqar_width`` on MQAR's own vocabulary, by ``kind``: "gdn" (GDN
        layers of ``heads`` heads), "no state" (the same layers with no state: no_state.NoStateConfig) or "attention"
        (full causal attention of ``heads`` heads, the positive control)."""
        from odebook.data.mqar import Vocab

        from .no_state import NoStateConfig

        if kind not in MQAR_KINDS:
            raise ValueError(f"unknown MQAR stack {kind!r}; allowed: {', '.join(MQAR_KINDS)}")
        config = dataclasses.replace(self.model_config(MQAR_KINDS[kind] * self.mqar_layers, d_model=self.mqar_width),
                                     vocab_size=Vocab(self.mqar_keys).size, max_seq_len=self.mqar_seq_len,
                                     n_head=heads)
        return NoStateConfig.of(config) if kind == "no state" else config

    def mqar_arms(self) -> dict[str, PatternConfig]:
        """The MQAR arms by name: a GDN stack and its no-state control at each head count of ``mqar_heads``, and full
        attention (``n_head`` heads)."""
        return {**{f"gdn h{h}": self.mqar_config(h) for h in self.mqar_heads},
                "attention": self.mqar_config(self.n_head, "attention"),
                **{f"no state h{h}": self.mqar_config(h, "no state") for h in self.mqar_heads}}

    def size_config(self, i: int, series: str) -> PatternConfig:
        """Ladder size ``i`` in ``series`` (the hybrid's S layer reads the state with no bottleneck)."""
        return self.model_config(SERIES[series](self.ladder_layers[i]), d_model=self.ladder_d[i],
                                 local_path="none" if series == "hybrid" else None)
