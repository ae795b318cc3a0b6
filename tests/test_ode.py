import pytest
import torch

from odebook.nn import ODEFlowBlock, euler_reference

D, H, C = 16, 2, 4


def block(**kw):
    torch.manual_seed(0)
    b = ODEFlowBlock(d_model=D, n_head=H, control_dim=C, alpha_init=0.5, **kw)
    for p in b.parameters():  # move off the zero-bias initialisation so every term matters
        torch.nn.init.normal_(p, std=0.3)
    return b


@pytest.mark.parametrize("steps", [1, 4, 7])
def test_euler_block_equals_an_explicit_euler_loop(steps):
    b = block(solver="euler", steps=steps)
    x, u = torch.randn(2, 5, D), torch.randn(2, C)
    torch.testing.assert_close(b(x, control=u), euler_reference(b.field, x, steps, control=u), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("adjoint", [False, True])
def test_every_ode_parameter_receives_a_gradient(adjoint):
    b = block(solver="rk4", steps=2, adjoint=adjoint)
    x = torch.randn(2, 5, D, requires_grad=True)
    b(x, control=torch.randn(2, C)).square().sum().backward()
    missing = [n for n, p in b.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing, f"no gradient reached {missing}"
    assert x.grad is not None and x.grad.abs().sum() > 0


@pytest.mark.parametrize("solver, steps, tol", [("rk4", 8, 1e-6), ("dopri5", 1, 1e-5)])
def test_adjoint_and_direct_gradients_agree(solver, steps, tol):
    """Tolerance: relative to each gradient's norm, in float64. With rk4 the adjoint integrates the adjoint ODE on
    the same grid, so the two differ by rk4's truncation error; dopri5 runs at rtol = atol = 1e-9."""
    grads = {}
    for adjoint in (False, True):
        b = block(solver=solver, steps=steps, adjoint=adjoint, rtol=1e-9, atol=1e-9).double()
        x = torch.randn(2, 5, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
        u = torch.randn(2, C, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        b(x, control=u).square().sum().backward()
        grads[adjoint] = {"x": x.grad, **{n: p.grad for n, p in b.named_parameters()}}
    for name, g in grads[False].items():
        err = (grads[True][name] - g).norm() / g.norm()
        assert err < tol, f"{name}: relative error {err:.2e} >= {tol}"


def test_adjoint_backward_sees_the_control_of_its_own_forward():
    """The adjoint re-evaluates the field during backward; another forward in between must not change its u."""
    b = block(solver="rk4", steps=2, adjoint=True)
    x, u = torch.randn(2, 5, D), torch.randn(2, C)
    loss = b(x, control=u).square().sum()
    b(x)  # an unrelated forward without control before the backward
    loss.backward()
    adjoint_grad = b.field.alpha.grad.clone()
    b.zero_grad()
    b.adjoint = False
    b(x, control=u).square().sum().backward()
    torch.testing.assert_close(adjoint_grad, b.field.alpha.grad, rtol=1e-3, atol=1e-6)


def test_the_control_changes_the_output_and_zero_control_equals_none():
    b = block(solver="euler", steps=2)
    x = torch.randn(2, 5, D)
    assert torch.equal(b(x), b(x, control=torch.zeros(2, C)))
    assert (b(x) - b(x, control=torch.randn(2, C))).abs().max() > 1e-3


def test_unknown_solver_is_refused():
    with pytest.raises(ValueError, match="unknown solver 'rk45'"):
        ODEFlowBlock(d_model=D, n_head=H, solver="rk45")
