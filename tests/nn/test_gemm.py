import pytest
import torch

from families import time_indexed
from odebook.nn import gemm, torch_private

PATHS = [pytest.param(True, id="oneDNN", marks=pytest.mark.skipif(not gemm.onednn_available(), reason="no oneDNN")),
         pytest.param(False, id="torch")]


@pytest.fixture(params=PATHS)
def backend(request, monkeypatch):
    monkeypatch.setattr(gemm, "MIN_MACS", 0)  # the small test products take the path under test
    with gemm.backend("onednn" if request.param else "torch"):
        yield request.param


@pytest.fixture
def onednn_calls(monkeypatch):
    """The list that grows by one at each product oneDNN computes."""
    calls = []
    inner_product = gemm._inner_product
    monkeypatch.setattr(gemm, "_inner_product", lambda *args: calls.append(1) or inner_product(*args))
    return calls


def test_the_gemm_is_chosen_by_a_context_that_restores_the_one_before(monkeypatch, onednn_calls):
    """No module switch to flip and forget: ``with gemm.backend(...)`` sets it for a block, and restores the
    previous backend on leaving, also when the block raises."""
    monkeypatch.setattr(gemm, "MIN_MACS", 0)
    a, b, _ = _operands(8, 16, 4)
    assert not hasattr(gemm, "USE_ONEDNN") and gemm.current_backend() == "onednn"
    with gemm.backend("torch"):
        gemm.mm(a, b)
        assert not onednn_calls and gemm.current_backend() == "torch"
        with pytest.raises(KeyError), gemm.backend("onednn"):
            gemm.mm(a, b)
            assert len(onednn_calls) == gemm.onednn_available()
            raise KeyError("leaves the inner block")
        assert gemm.current_backend() == "torch"
        gemm.mm(a, b)
        assert len(onednn_calls) == gemm.onednn_available()
    gemm.mm(a, b)
    assert len(onednn_calls) == 2 * gemm.onednn_available()
    with pytest.raises(ValueError, match="gemm.backend: 'mkl' is not one of onednn, torch"), gemm.backend("mkl"):
        pass


def _operands(n, k, m, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g), torch.randn(k, m, generator=g), torch.randn(n, m, generator=g)


# fp32 against an fp64 product: sums of k ~ 300 terms of size ~1 round to ~1e-5 in either order
TOL = dict(rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_equals_the_fp64_product_for_strided_operands(backend, transpose_a, transpose_b):
    a, b, _ = _operands(70, 300, 130)
    a = a.t().contiguous().t() if transpose_a else a  # same values, column-major storage
    b = b.t().contiguous().t() if transpose_b else b
    out = gemm.mm(a, b)
    assert out.dtype == torch.float32 and out.shape == (70, 130)
    torch.testing.assert_close(out.double(), a.double() @ b.double(), **TOL)


def test_addmm_accumulates_and_beta_zero_ignores_the_old_contents(backend):
    a, b, c = _operands(64, 300, 96)
    a2, b2, _ = _operands(64, 300, 96, seed=1)
    start = torch.full_like(c, torch.nan)  # beta 0 must not read it (0 · nan would be nan)
    total = gemm.addmm_(start, a, b, beta=0.0)
    total = gemm.addmm_(total, a2, b2)
    torch.testing.assert_close(total.double(), a.double() @ b.double() + a2.double() @ b2.double(), **TOL)
    accumulated_in_place = total.data_ptr() == start.data_ptr()
    assert accumulated_in_place != backend  # oneDNN returns a new tensor; torch writes into c: the path was taken
    with pytest.raises(ValueError, match="beta must be 0 or 1"):
        gemm.addmm_(c, a, b, beta=0.5)


def test_falls_back_to_torch_where_autograd_records_or_the_dtype_is_not_fp32(backend):
    a, b, _ = _operands(8, 16, 4)
    a.requires_grad_()
    out = gemm.mm(a, b)
    assert out.grad_fn is not None  # oneDNN's product has no gradient formula: torch's matmul was used
    out.sum().backward()
    torch.testing.assert_close(a.grad, b.sum(1).expand(8, 16))
    a64, b64 = a.detach().double(), b.double()
    torch.testing.assert_close(gemm.mm(a64, b64), a64 @ b64, rtol=0, atol=0)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("d_in, d_out", [(64, 96), (96, 64)])  # the weight gradient's two orientations
def test_linear_and_its_gradients_equal_f_linear(backend, bias, d_in, d_out):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 50, d_in, generator=g, dtype=torch.float64)
    w = torch.randn(d_out, d_in, generator=g, dtype=torch.float64) / 8
    b = torch.randn(d_out, generator=g, dtype=torch.float64) if bias else None
    grad_y = torch.randn(3, 50, d_out, generator=g, dtype=torch.float64)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    ref = torch.nn.functional.linear(x, w, b)
    ref_grads = torch.autograd.grad(ref, leaves, grad_y)
    leaves32 = [t.detach().float().requires_grad_() for t in leaves]
    out = gemm.linear(*leaves32) if bias else gemm.linear(*leaves32, None)
    grads = torch.autograd.grad(out, leaves32, grad_y.float())
    assert (out.grad_fn.name() == "_LinearBackward") == backend  # the oneDNN path was taken exactly when switched on
    torch.testing.assert_close(out.double(), ref, **TOL)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.double(), want, **TOL)
    assert gemm.linear(x, w, b).dtype == torch.float64  # other dtypes: F.linear


def test_linear_under_jacrev_uses_torch(backend):
    """torch.func's transforms (odebook.study.dynamics' Jacobians) see F.linear, which they know how to batch."""
    w = torch.randn(5, 4)
    jac = torch.func.jacrev(lambda z: gemm.linear(z, w))(torch.randn(4))
    torch.testing.assert_close(jac, w)


def test_flop_counts_do_not_depend_on_the_gemm(backend):
    """odebook.study.flops counts oneDNN's products like aten's (studies match compute by these counts)."""
    from odebook.study.flops import count_flops

    x = torch.randn(6, 10, 32, requires_grad=True)
    w, w2 = torch.randn(48, 32, requires_grad=True), torch.randn(32, 48)
    assert count_flops(lambda: gemm.linear(x, w, None).sum().backward()) == 3 * 2 * 60 * 32 * 48
    with torch.no_grad():
        assert count_flops(lambda: gemm.mm(x[0], w.t())) == 2 * 10 * 32 * 48
        assert count_flops(lambda: gemm.addmm_(torch.zeros(10, 48), x[0], w2)) == 2 * 10 * 32 * 48


def test_a_product_under_min_macs_goes_to_torch(backend, monkeypatch):
    monkeypatch.setattr(gemm, "MIN_MACS", 8 * 16 * 12)
    w = torch.randn(12, 16, requires_grad=True)
    few, many = torch.randn(1, 7, 16), torch.randn(1, 8, 16)
    assert gemm.linear(few, w).grad_fn.name() != "_LinearBackward"
    assert (gemm.linear(many, w).grad_fn.name() == "_LinearBackward") == backend


def test_without_autograd_a_large_weight_goes_to_onednn_whatever_the_rows(backend, monkeypatch, onednn_calls):
    """Decoding's one-row products: under no_grad a weight of MIN_WEIGHT elements takes oneDNN's kernel directly
    (no autograd node), equal to F.linear; a smaller weight, or the same product under autograd, stays with torch."""
    monkeypatch.setattr(gemm, "MIN_MACS", 2**40)  # only the weight rule can send these products to oneDNN
    monkeypatch.setattr(gemm, "MIN_WEIGHT", 48 * 64)
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(1, 1, 64, generator=g), torch.randn(48, 64, generator=g), torch.randn(48, generator=g)
    with torch.no_grad():
        out = gemm.linear(x, w, b)
        assert out.shape == (1, 1, 48) and out.grad_fn is None
        assert len(onednn_calls) == backend  # the weight rule sent it to oneDNN exactly when switched on
        torch.testing.assert_close(out, torch.nn.functional.linear(x, w, b), **TOL)
        gemm.linear(x[..., :32], w[:-1, :32], b[:-1])  # a weight under MIN_WEIGHT
        assert len(onednn_calls) == backend
    w.requires_grad_()
    assert gemm.linear(x, w, b).grad_fn.name() != "_LinearBackward"  # recorded: the rule of MIN_MACS alone
    assert len(onednn_calls) == backend


def _weight_views(m, k, generator):
    """[m, k] weights with the same values in layouts oneDNN's inner product is slow on (gaps between rows or
    columns, repeated entries), and in the two it is fast on (row-major, column-major)."""
    w = torch.randn(m, k, generator=generator)
    wide = torch.zeros(m, 3 * k)
    wide[:, k:2 * k] = w
    tall = torch.zeros(k, 2 * m)
    tall[:, :m] = w.t()
    every_other = torch.zeros(2 * m, k)
    every_other[::2] = w
    return {"row-major": w, "column-major": w.t().contiguous().t(), "column slice": wide[:, k:2 * k],
            "column slice, transposed": tall[:, :m].t(), "every other row": every_other[::2],
            "expanded": w[:1].expand(m, k)}


PLAIN = {"row-major", "column-major"}


@pytest.mark.skipif(not gemm.onednn_available(), reason="no oneDNN")
@pytest.mark.parametrize("layout", list(_weight_views(3, 4, torch.Generator())))
def test_onednn_gets_the_weight_of_every_product_in_a_plain_layout(layout, monkeypatch):
    """oneDNN's inner product takes orders of magnitude longer when its weight operand is a view with gaps or repeats
    (a column slice of a wider matrix; ``make bench`` prints it), as
    a linear layer's weight gradient is when its input is a slice of a wider tensor. Every path hands it a weight
    that is row- or column-major without gaps (a plain one as it is, no copy), and the product is unchanged."""
    monkeypatch.setattr(gemm, "MIN_MACS", 0)
    weights = []

    def spy(kernel, weight_at):  # records the weight operand of every oneDNN product
        def call(*args):
            weights.append(args[weight_at])
            return kernel(*args)
        return call

    assert gemm.onednn_available()  # its check, which calls the kernels too, has run before the spies go in
    for name, weight_at in (("onednn_linear", 1), ("onednn_linear_add", 2)):  # (x, weight, bias), (x, other, weight)
        monkeypatch.setattr(torch_private, name, spy(getattr(torch_private, name), weight_at))
    g = torch.Generator().manual_seed(4)
    w = _weight_views(48, 64, g)[layout]
    x, c = torch.randn(40, 64, generator=g), torch.randn(40, 48, generator=g)
    expected = x.double() @ w.double().t()
    products = {"mm": lambda: gemm.mm(x, w.t()), "addmm_": lambda: gemm.addmm_(c.clone(), x, w.t()) - c,
                "linear": lambda: gemm.linear(x, w)}
    for name, product in products.items():
        weights.clear()
        torch.testing.assert_close(product().double(), expected, **TOL, msg=name)
        assert len(weights) == 1, name
        (m, k), strides = weights[0].shape, weights[0].stride()
        assert strides in ((k, 1), (1, m)), (name, strides)
        assert (weights[0].data_ptr() == w.data_ptr()) == (layout in PLAIN), name  # copied only where needed
    # the weight gradient of a linear layer whose input is a slice of a wider tensor (weight operand: the input)
    wp = torch.randn(48, 64, generator=g, requires_grad=True)
    xs = _weight_views(40, 64, g)[layout].requires_grad_()
    weights.clear()
    gemm.linear(xs, wp).sum().backward()
    assert len(weights) == 3  # forward, grad_x, grad_w
    for weight in weights:
        (m, k), strides = weight.shape, weight.stride()
        assert strides in ((k, 1), (1, m)), ("weight gradient", strides)
    torch.testing.assert_close(wp.grad.double(), xs.detach().double().reshape(-1, 64).sum(0).expand(48, 64), **TOL)


def _families():
    from odebook import studies
    from odebook.models import lm as models

    TIME_INDEXED_MODELS = studies.load("02_time_indexed").params.TIME_INDEXED_MODELS

    V, D, H, T = 61, 32, 4, 24
    lm = dict(vocab_size=V, d_model=D, n_head=H, max_seq_len=T)
    out = {"baseline": lambda: models.gpt(**lm, n_layer=4),
           "hybrid-rk4-adjoint": lambda: models.ode_hybrid(**lm, n_layer=4, ode_layers=[1, 2], control_dim=4,
                                                           solver="rk4", steps=2, sensitivity="adjoint"),
           "gdn-swa-state-read": lambda: models.pattern_lm("GGS", **lm, window=8, chunk_size=8, state_read=True)}
    ti = dict(lm, n_layer=3, n_freq=4, d_emb=8, gate_width=12, d_state=5)
    out |= {f"02-{name}": (lambda name=name: time_indexed(name, **ti)) for name in TIME_INDEXED_MODELS}
    return V, T, out


@pytest.mark.skipif(not gemm.onednn_available(), reason="no oneDNN")
@pytest.mark.parametrize("family", list(_families()[2]))
def test_every_model_family_trains_alike_on_either_gemm(family, monkeypatch, onednn_calls):
    """Loss and every parameter's gradient of one training batch agree between oneDNN and torch's GEMM (the order
    of the sums differs, nothing else): rtol 1e-4 on the loss, gradients within 1e-4 of the largest entry."""
    from odebook.models.lm import lm_loss

    V, T, families = _families()
    monkeypatch.setattr(gemm, "MIN_MACS", 0)
    x = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(0))
    results = {}
    for use in (False, True):
        torch.manual_seed(0)
        model = families[family]()
        with gemm.backend("onednn" if use else "torch"):
            loss = lm_loss(model, (x, x.roll(-1, 1)))
            loss.backward()
        results[use] = loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    (loss_t, grads_t), (loss_o, grads_o) = results[False], results[True]
    assert onednn_calls  # the oneDNN pass did run oneDNN's products
    torch.testing.assert_close(loss_o, loss_t, rtol=1e-4, atol=0)
    assert grads_o.keys() == grads_t.keys() and grads_t
    for name, g in grads_t.items():
        torch.testing.assert_close(grads_o[name], g, rtol=0, atol=1e-4 * g.abs().max().item() + 1e-12, msg=name)
