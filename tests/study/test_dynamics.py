"""The dynamics helpers against closed forms on linear vector fields, and on the study models' blocks."""

import math

import pytest
import torch
from torch import nn

from families import time_indexed
from odebook.study import dynamics
from odebook.models.arms import HybridConfig
from odebook.nn.ode import ODEFlowBlock


def test_field_jacobian_of_a_linear_field_is_its_matrix_with_known_spectrum():
    A = torch.tensor([[-1.0, 2.0, 0.0], [0.0, -0.5, 0.0], [0.0, 0.0, 0.3]], dtype=torch.float64)
    h = torch.randn(1, 3, dtype=torch.float64)
    J = dynamics.field_jacobian(lambda t, x: x @ A.T, 0.5, h)
    assert torch.allclose(J, A, atol=1e-12)
    s = dynamics.leading_spectrum(J)
    assert s["max_real_eig"] == pytest.approx(0.3, abs=1e-10) and s["imag_of_it"] == pytest.approx(0.0, abs=1e-10)
    assert s["sigma_max"] == pytest.approx(torch.linalg.svdvals(A)[0].item(), rel=1e-10)
    rot = torch.tensor([[0.2, -3.0], [3.0, 0.2]], dtype=torch.float64)  # eigenvalues 0.2 ± 3i, σ = √(0.04 + 9)
    s = dynamics.leading_spectrum(rot)
    assert s["max_real_eig"] == pytest.approx(0.2) and s["imag_of_it"] == pytest.approx(3.0)
    assert s["sigma_max"] == pytest.approx(math.sqrt(9.04))


def test_ftle_of_linear_flows_matches_closed_forms():
    """Exact flow of dh/dt = a·h + b·(second coordinate) over [0, 1]: Φ = e^a [[1, b], [0, 1]], whose largest
    singular value is e^a (b/2 + √(1 + b²/4)); for a diagonal A the FTLE is max λ."""
    a, b = -0.4, 1.5
    phi = math.exp(a) * torch.tensor([[1.0, b], [0.0, 1.0]], dtype=torch.float64)
    x0 = torch.randn(2, dtype=torch.float64)
    assert dynamics.ftle(lambda x: phi @ x, x0) == pytest.approx(a + math.log(b / 2 + math.sqrt(1 + b * b / 4)))
    lam = torch.tensor([-2.0, 0.5, 0.1], dtype=torch.float64)
    assert dynamics.ftle(lambda x: torch.exp(lam) * x, torch.randn(3, dtype=torch.float64)) == pytest.approx(0.5)
    assert dynamics.ftle(lambda x: torch.exp(2 * lam) * x, torch.randn(3, dtype=torch.float64), 2.0) \
        == pytest.approx(0.5)


class _Linear(nn.Module):
    """A linear field dH/dt = H Aᵀ standing in for the ODE block's VectorField."""

    def __init__(self, A):
        super().__init__()
        self.A = nn.Parameter(A)

    def forward(self, t, h, control=None, cache=None):
        return h @ self.A.T


@pytest.mark.parametrize("solver,steps", [("euler", 4), ("rk4", 8)])
def test_ode_block_dynamics_on_a_linear_field_recover_eigenvalues_and_the_discrete_flow(solver, steps):
    """Euler with N steps: Φ = (I + A/N)^N, FTLE = log max|1 + λ/N|^N for diagonal A; rk4 ≈ the exact max λ."""
    lam = torch.tensor([-1.0, 0.7, 0.2], dtype=torch.float64)
    block = ODEFlowBlock(d_model=4, n_head=1, solver=solver, steps=steps).double()
    block.field = _Linear(torch.diag(lam))
    field, trajectory, flow = dynamics.ode_block_dynamics(block)
    x0 = torch.randn(1, 3, dtype=torch.float64)
    states = trajectory(x0)
    assert [t for t, _ in states] == pytest.approx([k / steps for k in range(steps + 1)])
    for t, h in states:
        assert dynamics.leading_spectrum(dynamics.field_jacobian(field, t, h))["max_real_eig"] == pytest.approx(0.7)
    expected = steps * math.log(1 + 0.7 / steps) if solver == "euler" else 0.7
    assert dynamics.ftle(flow, x0) == pytest.approx(expected, abs=1e-6)


def test_depth_stack_field_is_the_update_over_the_step():
    torch.manual_seed(0)
    model = time_indexed("ti_mlp_dt", vocab_size=20, d_model=8, n_head=2, n_layer=3, max_seq_len=8,
                                n_freq=2, gate_width=4).double()
    stack = model.blocks[0]
    field, trajectory, flow = dynamics.depth_stack_dynamics(stack)
    x0 = torch.randn(1, 4, 8, dtype=torch.float64)
    states = trajectory(x0)
    assert len(states) == 3
    t, x = states[1]
    assert torch.allclose(x + field(t, x) / 3, states[2][1])  # one Euler step with dt = 1/3
    assert torch.allclose(flow(x0), states[-1][1] + field(*states[-1]) / 3)


def test_analyse_runs_on_the_study_models_and_respects_causality():
    torch.manual_seed(0)
    cfg = HybridConfig(vocab_size=30, d_model=8, n_layer=3, n_head=2, max_seq_len=8, ode_layers=(1,), solver="euler",
                       steps=2, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=4, alpha_init=0.1)
    model = cfg.hybrid()
    seqs = [torch.randint(0, 30, (3,)) for _ in range(2)]
    table = dynamics.analyse(model, "blocks.1", seqs, label="hybrid")
    assert len(table) == 2 * 3 and set(table.t) == {0.0, 0.5, 1.0} and table.ftle.notna().all()
    assert next(model.parameters()).dtype == torch.float32  # the model itself is left as it was
    block = dict(model.double().named_modules())["blocks.1"]
    field, _, _ = dynamics.ode_block_dynamics(block)
    J = dynamics.field_jacobian(field, 0.0, torch.randn(1, 3, 8, dtype=torch.float64))
    assert torch.all(J[:8, 8:] == 0)  # token 0's field does not depend on later tokens


def test_euler_flow_jacobian_equals_differentiating_the_whole_solve_and_block_eigenvalues_equal_full_ones():
    torch.manual_seed(1)
    cfg = HybridConfig(vocab_size=30, d_model=8, n_layer=3, n_head=2, max_seq_len=8, ode_layers=(1,), solver="euler",
                       steps=3, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=4, alpha_init=0.1)
    block = cfg.hybrid().double().blocks[1]
    field, trajectory, flow = dynamics.ode_block_dynamics(block)
    x0 = torch.randn(1, 4, 8, dtype=torch.float64)
    states = trajectory(x0)
    phi = dynamics.euler_flow_jacobian([dynamics.field_jacobian(field, t, h) for t, h in states[:-1]], 1 / 3)
    assert torch.allclose(phi, dynamics._jacobian(flow, x0), atol=1e-10)
    J = dynamics.field_jacobian(field, 0.5, x0)
    full, by_block = dynamics.leading_spectrum(J), dynamics.leading_spectrum(J, block=8)
    assert by_block == pytest.approx(full, rel=1e-8)
    with pytest.raises(ValueError, match="not block lower-triangular"):
        dynamics.leading_spectrum(J.T.contiguous(), block=8)
