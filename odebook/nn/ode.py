"""A neural-ODE flow block: dH/dt = α · F(H + e_t(t) + e_u(u)) integrated over t ∈ [0, 1] with torchdiffeq.

F(h) = attn(LN₁ h) + mlp(LN₂ h) evaluates attention and MLP in parallel on the same state; e_t is a small time
embedding (1 → d → SiLU → d), e_u a linear embedding of a control vector u (u = 0 when none is given), and α a
learned scalar output scale. The control reaches the vector field through a module, never through a closure: each
solve integrates ``_Controlled(field, u)``, so ``odeint_adjoint`` sees every parameter, and its backward pass — which
re-evaluates the field later — still sees this call's u, whatever other forward passes ran in between.

Gradients (``sensitivity``):

direct      backpropagation through the solver's operations; memory grows with the number of steps.
adjoint     torchdiffeq's ``odeint_adjoint``: the backward pass integrates the adjoint ODE from t = 1 to 0 together
            with the state, storing nothing per step. The control gets no gradient.
reversible  the forward solve stores only H(1); the backward pass steps the state back with the same integrator
            (H_k ≈ step(H_{k+1}, −dt)), re-runs each forward step from that state and backpropagates through that one
            step. Memory stays one step's graph; the gradient is exact only as far as the states are recovered.

The vector field has no dropout: an adaptive solver, the adjoint and the reversible backward all re-evaluate F and
need it to be a deterministic function of (t, H).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torchdiffeq import odeint, odeint_adjoint

from odebook.nn.attention import MLP, CausalSelfAttention
from odebook.nn.kv_cache import KVCache

__all__ = ["VectorField", "ODEFlowBlock", "euler_reference", "fixed_grid_solve", "SOLVERS", "FIXED_GRID",
           "SENSITIVITIES", "STAGES", "solver_problem", "ode_layers_problem", "evaluations_per_forward",
           "Evaluations", "count_evaluations"]

SOLVERS = ("euler", "midpoint", "rk4", "dopri5")
FIXED_GRID = ("euler", "midpoint", "rk4")
STAGES = {"euler": 1, "midpoint": 2, "rk4": 4}  # vector-field evaluations per step of each fixed-grid solver
SENSITIVITIES = ("direct", "adjoint", "reversible")


def solver_problem(solver: str, sensitivity: str) -> str | None:
    """Why ``solver`` with ``sensitivity`` cannot run, or None: the one place of the rule that the reversible mode
    needs a fixed grid."""
    if solver not in SOLVERS:
        return f"unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}"
    if sensitivity not in SENSITIVITIES:
        return f"unknown sensitivity {sensitivity!r}; allowed: {', '.join(SENSITIVITIES)}"
    if sensitivity == "reversible" and solver not in FIXED_GRID:
        return f"steps back on a fixed grid; solver {solver!r} is adaptive"
    return None


def ode_layers_problem(layers: list[int], n_layer: int) -> str | None:
    """Why ``layers`` cannot be replaced by one ODE block in an ``n_layer`` stack, or None: they must be
    consecutive, increasing 0-based indices inside the stack."""
    layers = list(layers)
    if not layers:
        return "must name at least one layer"
    if layers != list(range(layers[0], layers[0] + len(layers))):
        return "must be consecutive and increasing, e.g. [2, 3]"
    if layers[0] < 0 or layers[-1] >= n_layer:
        return f"layers must lie in 0..{n_layer - 1} (n_layer = {n_layer})"
    return None


def evaluations_per_forward(solver: str, steps: int) -> int | None:
    """Vector-field evaluations of one forward solve on a fixed grid (None for adaptive solvers)."""
    return STAGES[solver] * steps if solver in STAGES else None


@dataclass
class Evaluations:
    """Vector-field evaluations counted by ``count_evaluations`` so far."""
    count: int = 0


@contextlib.contextmanager
def count_evaluations(module: nn.Module) -> Iterator[Evaluations]:
    """Count the vector-field evaluations of every ODE block in ``module`` while the context is open — forward and
    backward passes alike (the adjoint and the reversible backward re-evaluate the field), on whatever thread runs
    them. torchdiffeq keeps no statistics of its own; the count lives in the context, not on the module: nothing to
    reset, contexts may nest, and on leaving no trace stays on the module.

        with count_evaluations(model) as evaluations:
            model(x)
        evaluations.count"""
    evaluations = Evaluations()

    def count(*_) -> None:
        evaluations.count += 1

    handles = [block.field.register_forward_pre_hook(count) for block in module.modules()
               if isinstance(block, ODEFlowBlock)]
    try:
        yield evaluations
    finally:
        for handle in handles:
            handle.remove()


def _euler(func, t0, dt, t1, y):
    return dt * func(t0, y)


def _midpoint(func, t0, dt, t1, y):
    half_dt = 0.5 * dt
    return dt * func(t0 + half_dt, y + func(t0, y) * half_dt)


def _rk4(func, t0, dt, t1, y):  # torchdiffeq's "rk4" is the 3/8 rule (its rk4_alt_step_func)
    k1 = func(t0, y)
    k2 = func(t0 + dt * (1 / 3), y + dt * k1 * (1 / 3))
    k3 = func(t0 + dt * (2 / 3), y + dt * (k2 - k1 * (1 / 3)))
    k4 = func(t1, y + dt * (k1 - k2 + k3))
    return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125


_STEPS = {"euler": _euler, "midpoint": _midpoint, "rk4": _rk4}


def fixed_grid_solve(func, y0: torch.Tensor, times: torch.Tensor, solver: str) -> torch.Tensor:
    """y(times[-1]) from y(times[0]) = y0 on the increasing grid ``times`` with a fixed-grid solver, operation for
    operation the arithmetic of torchdiffeq 0.2.5's euler, midpoint and rk4 (tests hold it bit-identical to odeint,
    values and gradients). It skips odeint's per-call input checks, time casts and solution buffer, paid once per
    token per flow block in KV-cached decoding."""
    step, y = _STEPS[solver], y0
    for t0, t1 in zip(times[:-1], times[1:]):
        y = y + step(func, t0, t1 - t0, t1, y)
    return y


class VectorField(nn.Module):
    """f(t, H) = α · [attn(LN₁ z) + mlp(LN₂ z)],  z = H + e_t(t) + e_u(u). Without ``attention`` the field is
    α · mlp(LN₂ z): token-wise, it cannot move information between tokens."""

    def __init__(self, *, d_model: int, n_head: int, control_dim: int, alpha_init: float = 0.1,
                 attention: bool = True):
        super().__init__()
        self.time_embed = nn.Sequential(nn.Linear(1, d_model), nn.SiLU(), nn.Linear(d_model, d_model))
        self.control_embed = nn.Linear(control_dim, d_model)
        self.ln1 = nn.LayerNorm(d_model) if attention else None
        self.attn = CausalSelfAttention(d_model=d_model, n_head=n_head) if attention else None
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model=d_model)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def forward(self, t: torch.Tensor, h: torch.Tensor, control: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """t: scalar; h: [B, T, d]; control: [B, control_dim] or None (= zeros); cache: keys and values of the
        earlier positions at this same evaluation (incremental decoding)."""
        u = control if control is not None else h.new_zeros(h.shape[0], self.control_embed.in_features)
        e_t = self.time_embed(t.reshape(1, 1).to(h.dtype))  # [1, d]
        e_u = self.control_embed(u.to(h.dtype))  # [B, d]
        z = h + e_t[:, None, :] + e_u[:, None, :]  # [B, T, d]
        mixed = self.attn(self.ln1(z), cache=cache) if self.attn is not None else 0.0
        return self.alpha * (mixed + self.mlp(self.ln2(z)))


class _Controlled(nn.Module):
    """The vector field of one solve: the shared ``VectorField`` with that call's control (and cache) bound to it."""

    def __init__(self, field: VectorField, control: torch.Tensor | None, cache: KVCache | None = None):
        super().__init__()
        self.field, self.control, self.cache = field, control, cache

    def forward(self, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.field(t, h, self.control, self.cache)


class ODEFlowBlock(nn.Module):
    """Replaces a stack of residual layers by H(1), the solution of dH/dt = f(t, H) from H(0) = x.

    Fixed-grid solvers take ``steps`` equal steps; dopri5 adapts its steps to ``rtol``/``atol``; ``count_evaluations``
    counts the vector-field evaluations of a block of code."""

    def __init__(self, *, d_model: int, n_head: int, control_dim: int = 4, alpha_init: float = 0.1,
                 solver: str = "euler", steps: int = 4, sensitivity: str = "direct", rtol: float = 1e-3,
                 atol: float = 1e-4, attention: bool = True):
        super().__init__()
        self.field = VectorField(d_model=d_model, n_head=n_head, control_dim=control_dim, alpha_init=alpha_init,
                                 attention=attention)
        self.sensitivity, self.rtol, self.atol = sensitivity, rtol, atol
        self.set_solver(solver, steps)

    def set_solver(self, solver: str, steps: int) -> None:
        """Solve the flow with ``solver`` in ``steps`` steps from now on (the weights stay): how the block is built,
        and how a trained block is re-solved — both under ``solver_problem``'s rule for this block's sensitivity."""
        problem = solver_problem(solver, self.sensitivity) or (None if steps >= 1 else f"steps = {steps}: needs >= 1")
        if problem:
            raise ValueError(f"sensitivity {self.sensitivity!r}, solver {solver!r}: {problem}")
        self.solver, self.steps = solver, steps

    def grid(self, like: torch.Tensor) -> torch.Tensor:
        """The times at which a fixed-grid solver evaluates its steps: 0, 1/steps, …, 1."""
        return torch.linspace(0.0, 1.0, self.steps + 1, dtype=like.dtype, device=like.device)

    def solve(self, func: nn.Module, x: torch.Tensor, adjoint: bool = False) -> torch.Tensor:
        """H(1) from H(0) = x. Only t = 0 and t = 1 are output times, so the adjoint stores no per-step state; the
        fixed grid comes in as torchdiffeq's grid_constructor (it is flipped for the adjoint's backward solve)."""
        t = torch.tensor([0.0, 1.0], dtype=x.dtype, device=x.device)
        options = {"grid_constructor": lambda f, y0, tt: torch.linspace(tt[0], tt[-1], self.steps + 1, dtype=tt.dtype,
                                                                         device=tt.device)} \
            if self.solver in FIXED_GRID else {}
        kwargs = dict(method=self.solver, rtol=self.rtol, atol=self.atol, options=options)
        if adjoint:
            return odeint_adjoint(func, x, t, adjoint_params=tuple(self.field.parameters()), **kwargs)[-1]
        return odeint(func, x, t, **kwargs)[-1]

    def step(self, func: nn.Module, h: torch.Tensor, t0: torch.Tensor, t1: torch.Tensor) -> torch.Tensor:
        """One step of the fixed-grid solver from (t0, h) to t1 (t1 < t0 steps backwards)."""
        return odeint(func, h, torch.stack([t0, t1]), method=self.solver)[-1]

    def forward(self, x: torch.Tensor, control: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """x: [B, T, d]; control: [B, control_dim] or None (= zeros). With ``cache`` (fixed-grid solvers), x holds
        only the new positions and each evaluation's attention reads the keys and values it cached earlier; the solve
        steps through ``fixed_grid_solve`` (bit-identical to odeint, without its per-call overhead per token)."""
        if cache is not None:
            if self.solver not in FIXED_GRID:
                raise ValueError(f"a KV cache needs a fixed-grid solver (evaluations at known times), not "
                                 f"{self.solver!r}")
            return fixed_grid_solve(_Controlled(self.field, control, cache), x, self.grid(x), self.solver)
        if self.sensitivity == "reversible" and torch.is_grad_enabled():
            return _ReversibleSolve.apply(self, x, control, *self.field.parameters())
        return self.solve(_Controlled(self.field, control), x, adjoint=self.sensitivity == "adjoint")


class _ReversibleSolve(torch.autograd.Function):
    """Forward: the usual solve, keeping only H(1). Backward: for k = N−1 … 0, recover H_k by one backward step from
    H_{k+1}, re-run the forward step from it and backpropagate the adjoint a through that step alone."""

    @staticmethod
    def forward(ctx, block: ODEFlowBlock, x: torch.Tensor, control: torch.Tensor | None,
                *params: nn.Parameter) -> torch.Tensor:
        device = x.device.type
        ctx.block = block
        ctx.autocast = torch.is_autocast_enabled(device), torch.get_autocast_dtype(device), device
        with torch.no_grad():
            h = block.solve(_Controlled(block.field, control), x)
        ctx.save_for_backward(h, control)
        return h

    @staticmethod
    def backward(ctx, a: torch.Tensor):
        h, control = ctx.saved_tensors
        block = ctx.block
        params = tuple(block.field.parameters())
        want_u = control is not None and ctx.needs_input_grad[2]
        grads = [torch.zeros_like(p) for p in params]
        grad_u = torch.zeros_like(control) if want_u else None
        times = block.grid(h)
        enabled, dtype, device = ctx.autocast
        for k in reversed(range(block.steps)):
            with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=enabled):
                h_prev = block.step(_Controlled(block.field, control), h, times[k + 1], times[k])
            with torch.enable_grad(), torch.autocast(device, dtype=dtype, enabled=enabled):
                hp = h_prev.detach().requires_grad_()
                u = control.detach().requires_grad_() if want_u else control
                h_next = block.step(_Controlled(block.field, u), hp, times[k], times[k + 1])
                inputs = (hp, *params, *([u] if want_u else []))
                g = torch.autograd.grad(h_next, inputs, a, allow_unused=True)
            a = g[0]
            for acc, gi in zip(grads, g[1:1 + len(params)]):
                if gi is not None:
                    acc += gi
            if want_u:
                grad_u += g[-1]
            h = h_prev
        return None, a, grad_u, *grads


def euler_reference(field: VectorField, x: torch.Tensor, steps: int,
                    control: torch.Tensor | None = None) -> torch.Tensor:
    """Explicit Euler written out: H_{k+1} = H_k + dt · f(t_k, H_k), t_k = k · dt, dt = 1 / steps."""
    h, dt = x, 1.0 / steps
    for k in range(steps):
        h = h + dt * field(torch.tensor(k * dt, dtype=x.dtype), h, control)
    return h
