import pytest
import torch

from odebook.nn import ODEFlowBlock, euler_reference
from odebook.nn.ode import SENSITIVITIES, STAGES, count_evaluations

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


@pytest.mark.parametrize("sensitivity", SENSITIVITIES)
def test_every_ode_parameter_receives_a_gradient(sensitivity):
    b = block(solver="rk4", steps=2, sensitivity=sensitivity)
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
        b = block(solver=solver, steps=steps, sensitivity="adjoint" if adjoint else "direct", rtol=1e-9,
                  atol=1e-9).double()
        x = torch.randn(2, 5, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
        u = torch.randn(2, C, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        b(x, control=u).square().sum().backward()
        grads[adjoint] = {"x": x.grad, **{n: p.grad for n, p in b.named_parameters()}}
    for name, g in grads[False].items():
        err = (grads[True][name] - g).norm() / g.norm()
        assert err < tol, f"{name}: relative error {err:.2e} >= {tol}"


def test_adjoint_backward_sees_the_control_of_its_own_forward():
    """The adjoint re-evaluates the field during backward; another forward in between must not change its u."""
    b = block(solver="rk4", steps=2, sensitivity="adjoint")
    x, u = torch.randn(2, 5, D), torch.randn(2, C)
    loss = b(x, control=u).square().sum()
    b(x)  # an unrelated forward without control before the backward
    loss.backward()
    adjoint_grad = b.field.alpha.grad.clone()
    b.zero_grad()
    b.sensitivity = "direct"
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


def _all_grads(sensitivity, solver, steps):
    """Gradients of x, u and every parameter of a float64 block, flattened into one vector."""
    b = block(solver=solver, steps=steps, sensitivity=sensitivity).double()
    x = torch.randn(2, 5, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    u = torch.randn(2, C, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    b(x, control=u).square().sum().backward()
    return torch.cat([x.grad.flatten(), u.grad.flatten(), *(p.grad.flatten() for p in b.parameters())])


@pytest.mark.parametrize("solver, order", [("euler", 1), ("midpoint", 2), ("rk4", 4)])
def test_reversible_gradients_converge_to_direct_backpropagation_at_the_solvers_order(solver, order):
    """The reversible mode recovers H_k by stepping back from H_{k+1}, which is exact only up to the integrator's
    error: its gradient error against direct backpropagation (float64) must shrink at least like dt^order (with 20 %
    slack) when the steps double, and rk4 with 8 steps must agree to 1e-8 relative."""
    errors = {}
    for steps in (4, 8):
        direct, reversible = _all_grads("direct", solver, steps), _all_grads("reversible", solver, steps)
        errors[steps] = ((reversible - direct).norm() / direct.norm()).item()
    assert errors[8] < errors[4] / (0.8 * 2**order), errors
    if solver == "rk4":
        assert errors[8] < 1e-8, errors


@pytest.mark.parametrize("solver", ["euler", "midpoint", "rk4"])
def test_one_pass_of_a_fixed_grid_solver_evaluates_the_field_steps_times_stages(solver):
    b = block(solver=solver, steps=3)
    with count_evaluations(b) as evaluations:
        b(torch.randn(1, 4, D))
    assert evaluations.count == 3 * STAGES[solver]


@pytest.mark.parametrize("sensitivity, backward", [("direct", 0), ("reversible", 2 * 3), ("adjoint", None)])
def test_counting_sees_the_backward_pass_and_leaves_no_state_behind(sensitivity, backward):
    """The count lives in the context, not on the module: nothing to reset, contexts nest, and once a context is
    closed the field carries no counter and no hook."""
    b = block(solver="euler", steps=3, sensitivity=sensitivity)
    x = torch.randn(1, 4, D, requires_grad=True)
    with count_evaluations(b) as outer:
        y = b(x)
        with count_evaluations(b) as inner:
            y.sum().backward()
    assert outer.count == 3 + inner.count
    if backward is None:  # the adjoint integrates back with torchdiffeq's own steps: at least one per step
        assert inner.count >= 3
    else:  # reversible: one step back and one forward per step; direct: no evaluation in the backward pass
        assert inner.count == backward
    b(x)
    assert outer.count == 3 + inner.count
    assert not hasattr(b.field, "nfe") and not b.field._forward_pre_hooks


def _saved_bytes(sensitivity, steps):
    """Bytes the autograd graph keeps for the backward pass after one forward (storages counted once). The storages
    are held until counted: a graph dropped during the forward frees its saved tensors, and the allocator may hand
    the same address to a later one, which would then go uncounted."""
    b = block(solver="euler", steps=steps, sensitivity=sensitivity)
    x = torch.randn(2, 8, D, requires_grad=True)
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = b(x)
    return sum(s.nbytes() for s in storages.values()), out


@pytest.mark.parametrize("sensitivity", ["adjoint", "reversible"])
def test_adjoint_and_reversible_keep_the_same_memory_for_backward_at_any_number_of_steps(sensitivity):
    saved = {steps: _saved_bytes(sensitivity, steps)[0] for steps in (2, 16)}
    assert saved[2] == saved[16], saved
    # the calibration: backpropagation through the solver keeps every step, the same bytes each, at least a state
    direct = {steps: _saved_bytes("direct", steps)[0] for steps in (2, 9, 16)}
    assert direct[16] - direct[9] == direct[9] - direct[2] >= 7 * 2 * 8 * D * 4, direct


def test_reversible_mode_needs_a_fixed_grid_and_unknown_sensitivity_is_refused():
    with pytest.raises(ValueError, match="adaptive"):
        ODEFlowBlock(d_model=D, n_head=H, solver="dopri5", sensitivity="reversible")
    with pytest.raises(ValueError, match="unknown sensitivity 'backsolve'"):
        ODEFlowBlock(d_model=D, n_head=H, sensitivity="backsolve")


def test_a_solver_change_of_a_built_block_goes_through_the_rule_that_validated_it():
    """Re-solving a trained block (study 05 does) asks the same rule as building it: a reversible block cannot be
    switched to an adaptive solver, and a refused change leaves the block as it was."""
    b = block(solver="rk4", steps=2, sensitivity="reversible")
    with pytest.raises(ValueError, match="adaptive"):
        b.set_solver("dopri5", steps=1)
    with pytest.raises(ValueError, match="steps"):
        b.set_solver("euler", steps=0)
    assert (b.solver, b.steps) == ("rk4", 2)
    b.set_solver("midpoint", steps=3)
    assert (b.solver, b.steps) == ("midpoint", 3)


@pytest.mark.parametrize("solver", ["euler", "midpoint", "rk4"])
def test_the_fixed_grid_solve_is_bit_identical_to_odeint_in_values_and_gradients(solver):
    """The block's own fixed-grid stepping (no odeint per call; the KV-cached path) against torchdiffeq's odeint on
    the same grid, the path of every other forward pass: torch.equal, not a tolerance."""
    from torchdiffeq import odeint

    from odebook.nn.ode import _Controlled, fixed_grid_solve

    b = block(solver=solver, steps=3)
    x, u = torch.randn(2, 5, D), torch.randn(2, C)
    results = []
    for use_odeint in (False, True):
        b.zero_grad()
        xi = x.clone().requires_grad_()
        func = _Controlled(b.field, u)
        if use_odeint:
            grid = {"grid_constructor": lambda f, y0, t: torch.linspace(t[0], t[-1], 4, dtype=t.dtype)}
            out = odeint(func, xi, torch.tensor([0.0, 1.0]), method=solver, options=grid)[-1]
        else:
            out = fixed_grid_solve(func, xi, b.grid(xi), solver)
        out.square().sum().backward()
        results.append([out.detach(), xi.grad, *[p.grad.clone() for p in b.parameters()]])
    for ours, reference in zip(*results):
        assert torch.equal(ours, reference)
