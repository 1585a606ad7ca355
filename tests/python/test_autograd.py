"""Eager autograd: gradients against finite differences and closed forms, no_grad,
detach, accumulation, and eager training with the optimizers."""

import numpy as np
import pytest

import sluice

from conftest import DEVICES


def _numeric_grad(f, a, eps=1e-6):
    """Central differences of the scalar f(ndarray) at `a` (float64)."""
    g = np.zeros_like(a)
    it = np.nditer(a, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def _const(values, like):
    """A constant on the device of `like`."""
    return sluice.tensor(values, device=like.device)


# Each: (name, sluice expression of x (and a fixed w), NumPy expression of the same).
EXPRESSIONS = [
    ("tanh_times_x", lambda x, w: sluice.sum(sluice.tanh(x) * x),
     lambda x, w: np.sum(np.tanh(x) * x)),
    ("sigmoid", lambda x, w: sluice.sum(sluice.sigmoid(x)), lambda x, w: np.sum(1 / (1 + np.exp(-x)))),
    ("exp_log", lambda x, w: sluice.sum(sluice.log(sluice.exp(x) + 1.0)),
     lambda x, w: np.sum(np.log(np.exp(x) + 1))),
    ("sqrt_square", lambda x, w: sluice.sum(sluice.sqrt(sluice.square(x) + 1.0)),
     lambda x, w: np.sum(np.sqrt(x * x + 1))),
    ("relu_matmul", lambda x, w: sluice.mean(sluice.relu(x @ w)),
     lambda x, w: np.mean(np.maximum(x @ w, 0))),
    ("divide", lambda x, w: sluice.sum(x / (sluice.square(x) + 2.0)),
     lambda x, w: np.sum(x / (x * x + 2))),
    ("softmax", lambda x, w: sluice.sum(sluice.softmax(x) * _const(np.arange(4.0), x)),
     lambda x, w: np.sum(np.exp(x) / np.exp(x).sum(-1, keepdims=True) * np.arange(4.0))),
    ("reshape_transpose", lambda x, w: sluice.sum(sluice.square(sluice.transpose(
        sluice.reshape(x, [4, 3]), [1, 0])) * _const(np.arange(12.0).reshape(3, 4), x)),
     lambda x, w: np.sum(np.square(x.reshape(4, 3).T) * np.arange(12.0).reshape(3, 4))),
    ("scalar_ops", lambda x, w: sluice.sum(2.0 - x * 3.0 + 1.0 / (sluice.square(x) + 1.0)),
     lambda x, w: np.sum(2 - 3 * x + 1 / (x * x + 1))),
    ("mse", lambda x, w: sluice.mse_loss(x @ w, _const(np.ones((3, 2)), x)),
     lambda x, w: np.mean((x @ w - 1) ** 2)),
    ("abs_neg", lambda x, w: sluice.sum(sluice.abs(x) * sluice.neg(x @ w @ _const(np.ones((2, 4)), x))),
     lambda x, w: np.sum(np.abs(x) * -(x @ w @ np.ones((2, 4))))),
    ("pow", lambda x, w: sluice.sum(sluice.pow(sluice.square(x) + 1.0, 1.5) + sluice.pow(x, 3.0)),
     lambda x, w: np.sum((x * x + 1) ** 1.5 + x ** 3)),
    ("maximum_minimum_clip", lambda x, w: sluice.sum(sluice.maximum(x, x * 0.5) * sluice.minimum(
        x, _const(np.full((3, 4), 0.25), x)) + sluice.clip(x, -0.5, 0.5)),
     lambda x, w: np.sum(np.maximum(x, 0.5 * x) * np.minimum(x, 0.25) + np.clip(x, -0.5, 0.5))),
    ("concat_mean", lambda x, w: sluice.sum(sluice.mean(sluice.square(
        sluice.concat([x, x * 2.0], axis=1)), axis=[1]) * _const(np.arange(3.0), x)),
     lambda x, w: np.sum(np.mean(np.square(np.concatenate([x, 2 * x], axis=1)), axis=1)
                         * np.arange(3.0))),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name,expr,reference", EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_gradient_matches_finite_differences(ctx, device, seed, name, expr, reference):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 4))
    wn = rng.standard_normal((4, 2))
    x = sluice.tensor(a, device=device, requires_grad=True)
    w = sluice.tensor(wn, device=device)
    out = expr(x, w)
    assert out.shape in ((), (1,))
    np.testing.assert_allclose(out.item(), reference(a, wn), rtol=1e-9, atol=1e-9)
    out.backward()
    assert x.grad is not None and x.grad.device == device
    np.testing.assert_allclose(np.asarray(x.grad), _numeric_grad(lambda v: reference(v, wn), a),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_and_bias_closed_form(ctx, rng, device):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    wn = rng.standard_normal((3, 2)).astype(np.float32)
    bn = rng.standard_normal(2).astype(np.float32)
    x = sluice.tensor(a, device=device, requires_grad=True)
    w = sluice.tensor(wn, device=device, requires_grad=True)
    b = sluice.tensor(bn, device=device, requires_grad=True)
    loss = sluice.mean(sluice.square(x @ w + b))
    loss.backward()
    r = 2 * (a @ wn + bn) / (a @ wn).size
    np.testing.assert_allclose(np.asarray(w.grad), a.T @ r, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(x.grad), r @ wn.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(b.grad), r.sum(0), rtol=1e-4, atol=1e-5)  # broadcast


def test_gradients_accumulate_until_cleared(ctx, rng):
    a = rng.standard_normal(6)
    x = sluice.tensor(a, requires_grad=True)
    sluice.sum(x * x).backward()
    sluice.sum(x * 3.0).backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * a + 3, rtol=1e-12)
    x.clear_grad()
    assert x.grad is None or not np.asarray(x.grad).any()
    sluice.sum(x * 5.0).backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.full(6, 5.0))


def test_leaf_flags(ctx):
    x = sluice.tensor([1.0, 2.0])
    assert not x.requires_grad and x.stop_gradient and x.grad is None
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf and not x.stop_gradient
    y = x * 2.0
    assert y.requires_grad and not y.is_leaf
    x.stop_gradient = True
    assert not x.requires_grad


def test_no_grad_context_and_decorator(ctx, rng):
    x = sluice.tensor(rng.standard_normal(3), requires_grad=True)
    with sluice.no_grad():
        y = x * x
    assert not y.requires_grad

    @sluice.no_grad()
    def double(t):
        return t * 2.0

    assert not double(x).requires_grad
    assert double.__name__ == "double"
    z = x * x            # recording is back on after the block
    assert z.requires_grad
    # Only the recorded path contributes.
    loss = sluice.sum(z + y)
    loss.backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * np.asarray(x))


def test_detach_cuts_the_graph(ctx, rng):
    a = rng.standard_normal(4)
    x = sluice.tensor(a, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    np.testing.assert_array_equal(np.asarray(d), a)
    loss = sluice.sum(x * d)
    loss.backward()
    np.testing.assert_allclose(np.asarray(x.grad), a)   # d is a constant: not 2a


def test_explicit_output_gradient(ctx, rng):
    a = rng.standard_normal((2, 3))
    x = sluice.tensor(a, requires_grad=True)
    y = x * x
    g = rng.standard_normal((2, 3))
    y.backward(sluice.tensor(g))
    np.testing.assert_allclose(np.asarray(x.grad), 2 * a * g)


def test_backward_without_recorded_graph_raises(ctx):
    x = sluice.tensor([1.0, 2.0], requires_grad=True)
    with sluice.no_grad():
        y = sluice.sum(x * x)
    with pytest.raises(sluice.errors.Error):
        y.backward()


def test_sgd_step_matches_numpy(ctx, rng):
    X = rng.standard_normal((8, 3)).astype(np.float32)
    Y = rng.standard_normal((8, 1)).astype(np.float32)
    lin = sluice.nn.Linear(3, 1, seed=4)
    w0, b0 = np.asarray(lin.weight).copy(), np.asarray(lin.bias).copy()
    opt = sluice.optimizer.SGD(learning_rate=0.1, parameters=lin.parameters())
    loss = sluice.nn.MSELoss()(lin(sluice.tensor(X)), sluice.tensor(Y))
    loss.backward()
    opt.step()
    r = 2 * (X @ w0 + b0 - Y) / Y.size
    np.testing.assert_allclose(np.asarray(lin.weight), w0 - 0.1 * X.T @ r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(lin.bias), b0 - 0.1 * r.sum(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optimizer", ["Adam", "SGD"])
def test_eager_training_loop_loss_falls(ctx, rng, device, optimizer):
    X = rng.standard_normal((32, 4)).astype(np.float32)
    Y = (X @ rng.standard_normal((4, 1)) + 0.5).astype(np.float32)
    model = sluice.nn.Sequential(sluice.nn.Linear(4, 8, seed=1, context=ctx), sluice.nn.ReLU(),
                                 sluice.nn.Linear(8, 1, seed=2, context=ctx))
    params = model.parameters()
    if device != "cpu":
        params = [p.detach().to(device) for p in params]
        for p in params:
            p.requires_grad = True
        model.layers[0].weight, model.layers[0].bias = params[0], params[1]
        model.layers[2].weight, model.layers[2].bias = params[2], params[3]
    before = [np.asarray(p).copy() for p in params]
    lr = 0.05 if optimizer == "Adam" else 0.02
    opt = getattr(sluice.optimizer, optimizer)(learning_rate=lr, parameters=params)
    x, y = sluice.tensor(X, device=device), sluice.tensor(Y, device=device)
    losses = []
    for _ in range(40):
        loss = sluice.nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0]
    assert all(p.device == device for p in params)
    assert all(not np.array_equal(np.asarray(p), b) for p, b in zip(params, before))


def test_minimize_on_a_tensor_steps_after_backward_as_in_paddle(ctx, rng):
    lin = sluice.nn.Linear(2, 1, seed=0)
    opt = sluice.optimizer.SGD(learning_rate=0.1, parameters=lin.parameters())
    w0 = np.asarray(lin.weight).copy()
    x = sluice.tensor(rng.standard_normal((4, 2)).astype(np.float32))
    loss = sluice.mean(sluice.square(lin(x)))
    loss.backward()
    grad = np.asarray(lin.weight.grad).copy()
    opt.minimize(loss)  # steps with the gradient backward() left; no second backward
    np.testing.assert_allclose(np.asarray(lin.weight), w0 - 0.1 * grad, rtol=1e-6, atol=1e-7)


def test_eager_step_needs_parameters(ctx):
    with pytest.raises(ValueError):
        sluice.optimizer.Adam().step()
