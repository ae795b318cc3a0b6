"""The causality check every model family must pass."""

import torch


def assert_causal(model: torch.nn.Module, vocab_size: int, T: int, positions, atol: float = 1e-6) -> None:
    """Changing token j leaves the logits at positions < j unchanged (to ``atol``), and does change position j
    (so the check is not vacuous)."""
    model.eval()
    x = torch.randint(0, vocab_size, (2, T), generator=torch.Generator().manual_seed(0))
    for j in positions:
        x2 = x.clone()
        x2[:, j] = (x[:, j] + 1) % vocab_size
        with torch.no_grad():
            a, b = model(x), model(x2)
        torch.testing.assert_close(a[:, :j], b[:, :j], atol=atol, rtol=0)
        assert (a[:, j] - b[:, j]).abs().max() > 1e-5, f"changing token {j} did not change its own logits"
