"""The learned continuous-depth dynamics: Jacobians of the vector field along the trajectory and a finite-time
Lyapunov exponent (Tong et al. analyse both for their neural-ODE transformer).

For a block that maps a hidden state H(0) ∈ R^{T×d} to H(1) by dH/dt = f(t, H):

    J(t)   = ∂f(t, H(t)) / ∂H(t)              the field's Jacobian at the state the trajectory reaches at t,
                                              an (T·d) × (T·d) matrix (all tokens of one sequence: attention mixes
                                              them; causality makes it block lower-triangular in tokens)
    Φ      = ∂H(1) / ∂H(0)                    the Jacobian of the whole flow map
    λ_FTLE = log σ_max(Φ) / duration          the finite-time Lyapunov exponent: the largest rate at which the
                                              flow stretches a perturbation of the input (> 0 stretches, < 0 contracts)

The leading eigenvalue (largest real part) of J(t) says whether the field locally expands (> 0) or contracts (< 0)
along its most unstable direction; σ_max(J(t)) bounds how fast any perturbation grows at t. Both are computed in
float64 with torch.autograd.functional.jacobian (one backward pass per output: the solvers write their states in
place, which torch.func's vmap refuses), so keep T·d small: a few tokens of a few held-out sequences.

Adapters give (field, trajectory, flow) for an ``ODEFlowBlock`` and a ``DepthStack`` (whose
steps x ← x + h·f(t, x) define f = (block(x, t, h) − x) / h, the explicit-Euler field of the dt-scaled models).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn
from torch.func import jacrev

from odebook.nn.depth import DepthStack
from odebook.nn.ode import ODEFlowBlock, _Controlled

__all__ = ["field_jacobian", "sigma_max", "leading_spectrum", "ftle", "ftle_of", "euler_flow_jacobian",
           "ode_block_dynamics", "depth_stack_dynamics", "block_input",
           "analyse"]

Field = Callable[[float, torch.Tensor], torch.Tensor]


def _jacobian(fn: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor) -> torch.Tensor:
    """∂fn(h)/∂h as an [n, n] matrix, n = h.numel() (torch.func.jacrev: one vectorised backward pass)."""
    with warnings.catch_warnings():  # SDPA's CPU backward has no vmap rule yet: torch falls back to a loop, and says so
        warnings.simplefilter("ignore", UserWarning)
        return jacrev(lambda z: fn(z.view_as(h)).reshape(-1))(h.detach().reshape(-1))


def field_jacobian(field: Field, t: float, h: torch.Tensor) -> torch.Tensor:
    """J = ∂field(t, h)/∂h, [n, n]."""
    return _jacobian(lambda z: field(t, z), h)


def sigma_max(M: torch.Tensor) -> float:
    """The largest singular value, as √(largest eigenvalue of MᵀM) (LAPACK's symmetric solver: much faster than
    an SVD of a 1024² matrix, and only the largest value is needed)."""
    M = M.double()
    return math.sqrt(max(torch.linalg.eigvalsh(M.T @ M)[-1].item(), 0.0))


def leading_spectrum(J: torch.Tensor, block: int | None = None) -> dict[str, float]:
    """The largest real part among J's eigenvalues, that eigenvalue's |imaginary part|, and σ_max(J). With ``block``
    (= d for a causal sequence model, whose J is block lower-triangular in tokens) the eigenvalues are those of the
    diagonal blocks — the same set, far cheaper; a J with anything above its block diagonal is refused."""
    J = J.double()
    if block is None:
        eig = torch.linalg.eigvals(J)
    else:
        n = J.shape[0] // block
        if any(J[i * block:(i + 1) * block, (i + 1) * block:].abs().max() > 0 for i in range(n - 1)):
            raise ValueError("J is not block lower-triangular: an earlier token depends on a later one")
        eig = torch.cat([torch.linalg.eigvals(J[i * block:(i + 1) * block, i * block:(i + 1) * block])
                         for i in range(n)])
    top = eig[eig.real.argmax()]
    return {"max_real_eig": top.real.item(), "imag_of_it": abs(top.imag.item()), "sigma_max": sigma_max(J)}


def ftle_of(phi: torch.Tensor, duration: float = 1.0) -> float:
    """log σ_max(Φ) / duration for a flow-map Jacobian Φ."""
    return math.log(sigma_max(phi)) / duration


def ftle(flow: Callable[[torch.Tensor], torch.Tensor], h0: torch.Tensor, duration: float = 1.0) -> float:
    """log σ_max(∂flow(h0)/∂h0) / duration."""
    return ftle_of(_jacobian(flow, h0), duration)


def euler_flow_jacobian(jacobians: Sequence[torch.Tensor], step: float) -> torch.Tensor:
    """Φ of explicit Euler steps x_{k+1} = x_k + step·f(t_k, x_k): the product (I + step·J_{N−1}) ⋯ (I + step·J_0)
    of the field's Jacobians at the states entering each step (the chain rule, exact)."""
    eye = torch.eye(jacobians[0].shape[0], dtype=jacobians[0].dtype)
    phi = eye
    for J in jacobians:
        phi = (eye + step * J) @ phi
    return phi


def ode_block_dynamics(block: ODEFlowBlock) -> tuple[Field, Callable, Callable]:
    """(field, trajectory, flow) of an ODE flow block without control: trajectory(h0) → [(t, H(t))] at the block's
    grid (fixed-grid solvers) or at 0, ¼, ½, ¾, 1 (dopri5); flow(h0) = H(1)."""
    func = _Controlled(block.field, None)

    def field(t: float, h: torch.Tensor) -> torch.Tensor:
        return func(torch.tensor(t, dtype=h.dtype, device=h.device), h)

    def trajectory(h0: torch.Tensor) -> list[tuple[float, torch.Tensor]]:
        from torchdiffeq import odeint

        n = block.steps if block.solver != "dopri5" else 4
        ts = torch.linspace(0.0, 1.0, n + 1, dtype=h0.dtype, device=h0.device)
        with torch.no_grad():  # a fixed-grid solver steps exactly between the output times: the block's grid
            hs = odeint(func, h0, ts, method=block.solver, rtol=block.rtol, atol=block.atol)
        return list(zip(ts.tolist(), hs))

    return field, trajectory, lambda h0: block.solve(func, h0)


def depth_stack_dynamics(stack: DepthStack) -> tuple[Field, Callable, Callable]:
    """(field, trajectory, flow) of a depth-shared stack: f(t, x) = (block(x, t, h) − x) / h with the stack's step
    h; trajectory(x0) → [(t_k, x_k)], the state entering step k; flow = the whole stack."""
    h = 1.0 / stack.steps if stack.residual == "dt" else 1.0

    def field(t: float, x: torch.Tensor) -> torch.Tensor:
        return (stack.block(x, t, h) - x) / h

    def trajectory(x0: torch.Tensor) -> list[tuple[float, torch.Tensor]]:
        out, x = [], x0
        with torch.no_grad():
            for t in stack.times():
                out.append((t, x))
                x = stack.block(x, t, h)
        return out

    return field, trajectory, stack.forward


def block_input(model: nn.Module, block: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """The hidden state that enters ``block`` when ``model`` reads ``idx`` (eval mode, no gradient)."""
    seen = {}
    hook = block.register_forward_pre_hook(lambda m, args: seen.setdefault("x", args[0].detach()))
    try:
        with torch.no_grad():
            model(idx)
    finally:
        hook.remove()
    return seen["x"]


def euler_step(block: nn.Module) -> float | None:
    """The step h when ``block`` integrates by explicit Euler (x ← x + h·f), else None."""
    if isinstance(block, ODEFlowBlock):
        return 1.0 / block.steps if block.solver == "euler" else None
    return 1.0 / block.steps if block.residual == "dt" else 1.0


def analyse(model: nn.Module, block_name: str, sequences: Sequence[torch.Tensor], label: str = "") -> pd.DataFrame:
    """For each sequence (1-D token ids) the leading spectrum of J(t) at every trajectory time and the flow's FTLE
    for the block ``block_name`` (a name from ``model.named_modules()``), on a float64 CPU copy of the model:
    rows (model, sequence, t, max_real_eig, imag_of_it, sigma_max, ftle). Explicit-Euler blocks get Φ as the
    product of their step Jacobians; other solvers differentiate the whole solve."""
    m = copy.deepcopy(model).to("cpu", torch.float64).eval()
    block = dict(m.named_modules())[block_name]
    field, trajectory, flow = (ode_block_dynamics(block) if isinstance(block, ODEFlowBlock)
                               else depth_stack_dynamics(block))
    step = euler_step(block)
    rows = []
    for i, seq in enumerate(sequences):
        x = block_input(m, block, seq[None].cpu())
        states = trajectory(x)
        jacobians = [field_jacobian(field, t, h) for t, h in states]
        d = x.shape[-1]
        if step is not None:
            entering = jacobians[: len(jacobians) - 1] if isinstance(block, ODEFlowBlock) else jacobians
            lyap = ftle_of(euler_flow_jacobian(entering, step))
        else:
            lyap = ftle(flow, x)
        for (t, _), J in zip(states, jacobians):
            rows.append({"model": label, "sequence": i, "t": t, **leading_spectrum(J, block=d), "ftle": lyap})
    return pd.DataFrame(rows)
