"""Study 04's dropped-output arm: its GDN layer's output to the residual stream is dropped per sequence in training and
scaled by 1 − p at inference, while the state and what the state-reading layer reads of it are untouched."""

import torch

from odebook.nn.gdn import GatedDeltaNet
from tests.causality import assert_causal
from tests.families import SHAPE, V, output_drop_hybrid


def _gdn_outputs(model, x):
    """The first GDN layer's output (after its hook) and writes on ``x``."""
    seen = []
    gdn = next(m for m in model.modules() if isinstance(m, GatedDeltaNet))
    handle = gdn.register_forward_hook(lambda module, args, out: seen.append(out))
    model.run(x)
    handle.remove()
    return seen[0]


def test_at_inference_the_output_is_scaled_by_one_minus_p_and_the_writes_are_untouched():
    torch.manual_seed(0)
    dropped, plain = output_drop_hybrid(0.7).eval(), output_drop_hybrid(0.0).eval()
    plain.load_state_dict(dropped.state_dict())
    x = torch.randint(0, V, (3, 20), generator=torch.Generator().manual_seed(1))
    a, b = _gdn_outputs(dropped, x), _gdn_outputs(plain, x)
    torch.testing.assert_close(a.y, 0.3 * b.y, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.state, b.state, atol=0, rtol=0)
    torch.testing.assert_close(a.writes.k, b.writes.k, atol=0, rtol=0)


def test_in_training_whole_sequences_are_dropped_about_p_of_the_time():
    torch.manual_seed(0)
    model = output_drop_hybrid(0.7).train()
    x = torch.randint(0, V, (400, 6), generator=torch.Generator().manual_seed(2))
    y = _gdn_outputs(model, x).y
    dropped = (y.abs().amax(dim=(1, 2)) == 0)
    kept = (y.abs().amin(dim=(1, 2)) > 0)
    assert bool((dropped | kept).all())  # all of a sequence or none of it
    assert 0.62 < dropped.float().mean() < 0.78  # p = 0.7; 400 sequences: sd ≈ 0.023


def test_the_dropped_output_hybrid_is_causal():
    assert_causal(output_drop_hybrid(0.7), SHAPE["vocab_size"], 20, positions=[3, 11, 19])
