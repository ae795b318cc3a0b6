"""Every model family of the book at a tiny shape, for the tests that run each of them (causality on the GPU, the
precision policies on the CPU and the GPU)."""

import dataclasses

from odebook import studies
from odebook.models import lm as models


def time_indexed(name: str, *, vocab_size: int, **shape):
    """Study 02's arm ``name`` (its arms module) at ``vocab_size`` and ``shape``, its other settings the study's
    defaults."""
    config = studies.schema("02_time_indexed")().model_config(vocab_size)
    return dataclasses.replace(config, **shape).build(name)

def output_drop_hybrid(p: float, pattern: str = "GGS"):
    """Study 04's dropped-output arm: the state-reading hybrid ``pattern`` with its GDN output dropped with ``p``."""
    from odebook.models.local_paths import LOCAL_PATHS

    config = studies.load("04_mixed_training").output_drop.OutputDropConfig
    return config(pattern=pattern, **SHAPE, window=8, chunk_size=8, state_read=True, local_path=LOCAL_PATHS["drop_0.7"],
                  output_drop=p).build()


def no_state_gdn(pattern: str = "GG"):
    """Study 03's no-state control: the GDN stack ``pattern`` with its state emptied before every write."""
    config = studies.load("03_gdn_scaling").no_state.NoStateConfig
    return config(pattern=pattern, **SHAPE, window=8, chunk_size=8, state_read=False, local_path="none").build()


V, D, H, T = 61, 32, 4, 40
SHAPE = dict(vocab_size=V, d_model=D, n_head=H, max_seq_len=T)
FAMILIES = {
    "baseline": lambda: models.gpt(**SHAPE, n_layer=4),
    "hybrid-rk4": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=2),
    "hybrid-rk4-adjoint": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=2,
                                                    sensitivity="adjoint"),
    "hybrid-midpoint-reversible": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2],
                                                            solver="midpoint", steps=3, sensitivity="reversible"),
    "tong": lambda: time_indexed("tong", **SHAPE, n_layer=4),
    "ti_mlp": lambda: time_indexed("ti_mlp", **SHAPE, n_layer=4),
    "ti_ssm": lambda: time_indexed("ti_ssm", **SHAPE, n_layer=4),
    "gdn-swa": lambda: models.pattern_lm("GGS", **SHAPE, window=8),
    "gdn-state-read": lambda: models.pattern_lm("GGS", **SHAPE, window=8, state_read=True, local_path="drop_0.7"),
    "gdn-output-drop": lambda: output_drop_hybrid(0.7),
    "gdn-no-state": no_state_gdn,
}
