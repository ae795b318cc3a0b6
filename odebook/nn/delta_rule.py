"""The gated delta rule, three ways: a plain loop (reference), a chunked pure-PyTorch form (CPU and fallback), and
fla-core's ``chunk_gated_delta_rule`` on CUDA (imported lazily: its kernels need triton and a GPU).

Per head, with state S ∈ R^{K×V}, log-space gate g_t ≤ 0, write strength β_t ∈ (0, 1] and scale = 1/√K:
    S ← exp(g_t)·S;   u_t = β_t·(v_t − Sᵀk_t);   S ← S + k_t u_tᵀ;   o_t = Sᵀ(scale·q_t).
Layout as fla: q, k [B, T, H, K]; v [B, T, H, V]; g, β [B, T, H]; states [B, H, K, V]. The callers L2-normalise
q and k.

The chunked form. Within a chunk with cumulative gate G_t = Σ_{i≤t} g_i, unrolling the recurrence gives
    S_t = e^{G_t} S₀ + Σ_{i≤t} e^{G_t − G_i} k_i u_iᵀ,
    u_i = β_i (v_i − e^{G_i} S₀ᵀk_i − Σ_{j<i} e^{G_i − G_j} (k_iᵀk_j) u_j),
so (I + L) U = β⊙V − β⊙e^{G}⊙(K S₀) with L_ij = β_i e^{G_i − G_j} k_iᵀk_j (j < i): one unit-lower-triangular solve
per chunk, shared by all chunks. Then O = e^{G}⊙(Q̃ S₀) + (M ⊙ Q̃Kᵀ) U with M_ti = e^{G_t − G_i} (i ≤ t), and
S_C = e^{G_C} S₀ + (e^{G_C − G}⊙K)ᵀ U. Every exponent is ≤ 0, so nothing overflows.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["gated_delta_rule_reference", "gated_delta_rule_chunked", "gated_delta_rule", "fla_kernel"]


def gated_delta_rule_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                               beta: torch.Tensor, scale: float | None = None,
                               initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence step by step, in fp32. Returns (o [B, T, H, V], final state [B, H, K, V])."""
    dtype = q.dtype
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    B, _, H, K = q.shape
    scale = K**-0.5 if scale is None else scale
    S = q.new_zeros(B, H, K, v.shape[-1]) if initial_state is None else initial_state.float()
    out = []
    for q_t, k_t, v_t, g_t, b_t in zip(*(x.unbind(1) for x in (q, k, v, g, beta))):  # unbind: linear backward
        S = S * g_t.exp()[..., None, None]
        u = b_t[..., None] * (v_t - torch.einsum("bhk,bhkv->bhv", k_t, S))
        S = S + k_t[..., :, None] * u[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q_t * scale, S))
    return torch.stack(out, 1).to(dtype), S


def gated_delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                             beta: torch.Tensor, scale: float | None = None,
                             initial_state: torch.Tensor | None = None,
                             chunk_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The same recurrence in chunks of ``chunk_size`` steps (see the module docstring)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K**-0.5 if scale is None else scale
    C = chunk_size
    pad = -T % C
    # [B, H, N, C, ·]; padded steps have g = 0, β = 0, k = q = 0: they neither decay, write nor read the state
    q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)).transpose(1, 2).reshape(B, H, -1, C, x.shape[-1]) for x in (q, k, v))
    g, beta = (F.pad(x, (0, 0, 0, pad)).transpose(1, 2).reshape(B, H, -1, C) for x in (g, beta))
    q = q * scale
    G = g.cumsum(-1)  # [B, H, N, C]
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # e^{G_t − G_i}, i ≤ t
    kk = k @ k.transpose(-1, -2)  # [B, H, N, C, C]
    L = (beta[..., None] * decay * kk).tril(-1)
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    solve = lambda rhs: torch.linalg.solve_triangular(eye + L, rhs, upper=False, unitriangular=True)  # noqa: E731
    w_v = solve(beta[..., None] * v)  # U = w_v − w_k S₀
    w_k = solve((beta * G.exp())[..., None] * k)
    attn = (q @ k.transpose(-1, -2)) * decay  # M ⊙ Q̃Kᵀ
    q_decay = q * G.exp()[..., None]
    k_decay = k * (G[..., -1:] - G).exp()[..., None]
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(q.dtype)
    out = []
    chunks = (x.unbind(2) for x in (w_v, w_k, q_decay, attn, k_decay, G[..., -1].exp()))  # unbind: linear backward
    for wv, wk, qd, a, kd, last in zip(*chunks):
        U = wv - wk @ S
        out.append(qd @ S + a @ U)
        S = last[..., None, None] * S + kd.transpose(-1, -2) @ U
    o = torch.stack(out, 2).reshape(B, H, -1, V)[:, :, :T].transpose(1, 2)
    return o, S


@functools.cache
def fla_kernel() -> Callable | None:
    """fla-core's ``chunk_gated_delta_rule`` where it runs correctly here, else None: fla-core or triton missing, or
    a Hopper GPU under a Triton whose gated backward fla-core itself refuses (3.4 <= Triton < 3.7.1, fla-core's
    issue #640; seen on an H100 with torch 2.11's Triton 3.6) — the chunked form runs there instead, with a warning."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError:
        return None
    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:  # a fla-core version without these flags
        return chunk_gated_delta_rule
    if IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1:
        warnings.warn("fla-core refuses its gated backward on Hopper GPUs with 3.4 <= Triton < 3.7.1 (fla-core issue "
                      "#640): the Gated DeltaNet runs odebook's chunked PyTorch form; upgrade Triton for fla-core's "
                      "kernels", stacklevel=2)
        return None
    return chunk_gated_delta_rule


def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                     scale: float | None = None, initial_state: torch.Tensor | None = None,
                     chunk_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """fla-core's kernel on CUDA where it runs (``fla_kernel``), else the chunked pure-PyTorch form in fp32.

    Under autocast the inputs arrive in mixed dtypes (the callers' L2 norm promotes q and k to fp32, v and β are
    half precision): fla-core gets q, k, v and β in autocast's dtype and the log decay in fp32, as its own layer
    passes them; the chunked form runs in fp32 (fp64 stays fp64) with autocast off, so its matmuls and its
    triangular solve see one dtype. The output comes back in autocast's dtype (else q's)."""
    device = q.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else q.dtype
    kernel = fla_kernel() if q.is_cuda else None
    if kernel is not None:
        q, k, v, beta = (t.to(dtype) for t in (q, k, v, beta))
        return kernel(q, k, v, g.float(), beta, scale=scale, initial_state=initial_state, output_final_state=True)
    wide = lambda t: None if t is None else t.to(torch.promote_types(t.dtype, torch.float32))  # noqa: E731
    with torch.autocast(device, enabled=False):
        o, state = gated_delta_rule_chunked(*map(wide, (q, k, v, g, beta)), scale, wide(initial_state), chunk_size)
    return o.to(dtype), state
