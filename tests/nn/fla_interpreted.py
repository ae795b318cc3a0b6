"""fla-core's ``chunk_gated_delta_rule`` on CPU tensors under Triton's interpreter, against odebook's reference.

Run as its own process (tests/nn/test_fla_interpreted.py does): TRITON_INTERPRET must be set before triton or fla
is first imported, and must not leak into the rest of the suite.

    python tests/nn/fla_interpreted.py [--tiles first|last] [--seed-error] CASE ...

prints one JSON object: for each case, the RMS error relative to the reference's RMS of the output, the final state
and the gradients of q, k, v, g, β and h0; and, per autotuned kernel, how many tile configurations it had and which
one it ran.

Three gaps of the interpreter are bridged here (none is in fla-core):
- the autotuner asks the GPU driver for a benchmarker ("0 active drivers"): every configuration gets a time by its
  position instead, so the first (``--tiles first``) or the last (``--tiles last``) is taken;
- a ``for i in range(n)`` loop variable is a Python int under the interpreter where compiled Triton gives a tensor
  (fla calls ``i_t.to(tl.int64)``): each such loop rebinds it as a tensor first (``tl.static_range`` loops keep ints);
- (not bridged) bf16 is stored as raw 16-bit patterns and ``tl.dot``, arithmetic and sums run on the bits, so bf16
  is not run here.

``--seed-error`` scales one exponent of the gated backward (the decay e^{G_t − G_i} inside a chunk, in the kernel
that computes dq, dk and dg) by 1.01: the check must catch it.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import ast  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from triton.runtime import autotuner, interpreter  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from odebook.nn.delta_rule import gated_delta_rule_reference  # noqa: E402

SEEDED_KERNEL = "def chunk_bwd_kernel_dqkwg("
SEEDED_ERROR = ("exp2(b_g[:, None] - b_g[None, :])", "exp2(1.01 * (b_g[:, None] - b_g[None, :]))")
CASES = {  # B, T, H, K = V, dtype, variable-length boundaries, q and k L2-normalised by the kernel
    "fp32": dict(),
    "fp16": dict(dtype=torch.float16),
    "varlen": dict(B=1, T=164, cu_seqlens=[0, 37, 100, 164]),  # three sequences, chunks of 64 cut by two
    "l2norm": dict(l2norm=True),
}


class TensorLoopVariables(interpreter.ASTTransformer):
    """Rebinds the variable of every ``for x in range(...)`` / ``tl.range(...)`` loop as a tensor (``x = x``, which
    the interpreter's own rewrite turns into ``to_tensor(x)``), as compiled Triton has it."""

    def visit_For(self, node):
        self.generic_visit(node)
        it = node.iter
        called = getattr(it.func, "id", getattr(it.func, "attr", None)) if isinstance(it, ast.Call) else None
        if called == "range" and isinstance(node.target, ast.Name):
            name = node.target.id
            node.body.insert(0, self.visit(ast.Assign(targets=[ast.Name(name, ast.Store())],
                                                      value=ast.Name(name, ast.Load()))))
        return node


def bridge(tiles: str, seed_error: bool) -> dict:
    """Install the bridges; returns {kernel name: (configurations, index chosen)}, filled as kernels run."""
    interpreter.FunctionRewriter.ast_transformer = TensorLoopVariables()
    rank = (lambda i, n: i) if tiles == "first" else (lambda i, n: n - 1 - i)
    autotuner.Autotuner._bench = lambda self, *a, config, **kw: [float(rank(self.configs.index(config),
                                                                            len(self.configs)))] * 3
    chosen = {}
    run = autotuner.Autotuner.run

    def recording_run(self, *args, **kwargs):
        out = run(self, *args, **kwargs)
        chosen[self.base_fn.__name__] = (len(self.configs), self.configs.index(self.best_config))
        return out

    autotuner.Autotuner.run = recording_run
    if seed_error:
        prepare = interpreter.FunctionRewriter._prepare_source

        def seeded(self, lines):
            src = prepare(self, lines)
            if SEEDED_KERNEL in src:
                old, new = SEEDED_ERROR
                assert old in src, f"the seeded error's target {old!r} is not in {SEEDED_KERNEL}"
                src = src.replace(old, new, 1)  # the first is the gated branch (USE_G; the second is USE_G_GAMMA)
            return src

        interpreter.FunctionRewriter._prepare_source = seeded
    return chosen


def inputs(B=2, T=100, H=2, K=64, seed=0, **_):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(B, T, H, K, generator=g), torch.randn(B, T, H, K, generator=g)
    v = torch.randn(B, T, H, K, generator=g)
    gate = F.logsigmoid(torch.randn(B, T, H, generator=g) + 2)  # log-space, ≤ 0
    beta = torch.sigmoid(torch.randn(B, T, H, generator=g))
    return q, k, v, gate, beta


def rms_ratio(a: torch.Tensor, ref: torch.Tensor) -> float:
    """RMS(a − ref) / RMS(ref), fla's own measure (fla.utils.testing)."""
    return ((a.double() - ref.double()).pow(2).mean().sqrt() / ref.double().pow(2).mean().sqrt()).item()


def reference(q, k, v, gate, beta, h0, cu_seqlens, l2norm):
    """odebook's step-by-step recurrence in fp32, sequence by sequence where boundaries are given."""
    if l2norm:
        q, k = F.normalize(q.float(), dim=-1), F.normalize(k.float(), dim=-1)
    bounds = cu_seqlens or [0, q.shape[1]]
    outs, states = [], []
    for n, (a, b) in enumerate(zip(bounds, bounds[1:])):
        per = [x[:, a:b] for x in (q, k, v, gate, beta)]
        o, s = gated_delta_rule_reference(*per, initial_state=h0[n:n + 1] if cu_seqlens else h0)
        outs.append(o.float())
        states.append(s)
    return torch.cat(outs, 1), torch.cat(states, 0)


def errors(case: dict) -> dict:
    """Forward, final state and full backward of fla-core's kernel and of the reference from the same inputs."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    dtype, cu, l2norm = case.get("dtype", torch.float32), case.get("cu_seqlens"), case.get("l2norm", False)
    q, k, v, gate, beta = inputs(**case)
    if not l2norm:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    N = len(cu) - 1 if cu else q.shape[0]
    h0 = torch.randn(N, q.shape[2], q.shape[3], v.shape[3], generator=torch.Generator().manual_seed(1))
    leaves = [x.to(dtype) for x in (q, k, v)] + [gate] + [beta.to(dtype), h0]  # the gate and h0 stay fp32, as fla's
    results = {}
    for name in ("fla", "reference"):
        xs = [x.detach().clone().requires_grad_() for x in leaves]
        if name == "fla":
            o, s = chunk_gated_delta_rule(*xs[:5], initial_state=xs[5], output_final_state=True,
                                          use_qk_l2norm_in_kernel=l2norm,
                                          cu_seqlens=torch.tensor(cu) if cu else None)
        else:
            o, s = reference(*xs, cu, l2norm)
        g = torch.Generator().manual_seed(9)
        w_o, w_s = torch.randn(o.shape, generator=g), torch.randn(s.shape, generator=g)
        ((o.float() * w_o).sum() + (s.float() * w_s).sum()).backward()
        results[name] = [o, s] + [x.grad for x in xs]
    names = ["o", "state", "dq", "dk", "dv", "dg", "dbeta", "dh0"]
    return {n: rms_ratio(a, b) for n, a, b in zip(names, results["fla"], results["reference"])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+", choices=list(CASES))
    parser.add_argument("--tiles", choices=("first", "last"), default="first")
    parser.add_argument("--seed-error", action="store_true")
    args = parser.parse_args()
    chosen = bridge(args.tiles, args.seed_error)
    result = {name: errors(CASES[name]) for name in args.cases}
    print(json.dumps({"errors": result, "tiles": chosen}))


if __name__ == "__main__":
    main()
