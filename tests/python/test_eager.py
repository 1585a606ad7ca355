"""Eager tensors: ops and operators against NumPy, on cpu and sim devices, streams, and
contexts that check synchronization."""

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import DEVICES

SEEDS = range(3)


def _f(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _close(t, expected, atol=1e-5, rtol=1e-5):
    got = np.asarray(t)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", SEEDS)
def test_binary_operators(ctx, device, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = _f(rng, 3, 4, dtype=dtype), _f(rng, 3, 4, dtype=dtype)
    b = np.where(np.abs(b) < 0.1, 0.5, b).astype(dtype)
    x, y = sluice.tensor(a, device=device), sluice.tensor(b, device=device)
    for out, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (-x, -a), (sluice.add(x, y), a + b), (sluice.subtract(x, y), a - b),
                      (sluice.multiply(x, y), a * b), (sluice.divide(x, y), a / b)]:
        assert out.device == device
        assert out.dtype == x.dtype
        _close(out, want)
    for out, want in [(x < y, a < b), (x <= y, a <= b), (x > y, a > b), (x >= y, a >= b),
                      (sluice.less_than(x, y), a < b), (sluice.less_equal(x, y), a <= b),
                      (sluice.greater_than(x, y), a > b), (sluice.greater_equal(x, y), a >= b),
                      (sluice.equal(x, x), np.ones_like(a, bool)),
                      (sluice.not_equal(x, y), a != b)]:
        assert out.dtype == "bool"
        np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scalar", [2, -1.5, 0.25])
def test_operators_with_python_numbers(ctx, rng, device, scalar):
    a = _f(rng, 2, 5)
    a = np.where(np.abs(a) < 0.1, 0.5, a).astype(np.float32)
    x = sluice.tensor(a, device=device)
    s = np.float32(scalar)
    pairs = [(x + scalar, a + s), (scalar + x, s + a), (x - scalar, a - s), (scalar - x, s - a),
             (x * scalar, a * s), (scalar * x, s * a), (x / scalar, a / s), (scalar / x, s / a)]
    for out, want in pairs:
        assert out.device == device and out.dtype == "f32"
        _close(out, want)
    for out, want in [(x < scalar, a < s), (scalar < x, s < a), (x >= scalar, a >= s),
                      (x <= scalar, a <= s), (x > scalar, a > s)]:
        np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcasting(ctx, rng, device):
    a, b, c = _f(rng, 4, 3), _f(rng, 3), _f(rng, 4, 1)
    x, y, z = (sluice.tensor(v, device=device) for v in (a, b, c))
    _close(x + y, a + b)
    _close(x * z, a * c)
    _close(x - sluice.tensor(np.float32(2.0), device=device), a - 2.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", SEEDS)
def test_unary_functions(ctx, device, seed):
    rng = np.random.default_rng(seed)
    a = _f(rng, 5, 3)
    pos = np.abs(a) + 0.1
    x, p = sluice.tensor(a, device=device), sluice.tensor(pos, device=device)
    _close(sluice.relu(x), np.maximum(a, 0))
    _close(sluice.sigmoid(x), 1 / (1 + np.exp(-a)))
    _close(sluice.tanh(x), np.tanh(a))
    _close(sluice.exp(x), np.exp(a))
    _close(sluice.log(p), np.log(pos))
    _close(sluice.sqrt(p), np.sqrt(pos))
    _close(sluice.square(x), a * a)
    _close(sluice.scale(x, 3.0, -1.0), 3 * a - 1)
    _close(sluice.increment(sluice.tensor(np.float32(1.5), device=device), 2.0), 3.5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", SEEDS)
def test_matmul(ctx, device, seed):
    rng = np.random.default_rng(seed)
    a, b = _f(rng, 3, 5), _f(rng, 5, 2)
    x, y = sluice.tensor(a, device=device), sluice.tensor(b, device=device)
    _close(x @ y, a @ b)
    _close(sluice.matmul(x, y), a @ b)
    xt, yt = sluice.tensor(a.T.copy(), device=device), sluice.tensor(b.T.copy(), device=device)
    _close(sluice.matmul(xt, y, transpose_x=True), a @ b)
    _close(sluice.matmul(x, yt, transpose_y=True), a @ b)
    _close(sluice.matmul(xt, yt, transpose_x=True, transpose_y=True), a @ b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis,keepdim", [(None, False), ([0], False), ([1], True),
                                          ([0, 2], False), ([-1], True)])
def test_reductions(ctx, rng, device, axis, keepdim):
    a = _f(rng, 3, 4, 5)
    x = sluice.tensor(a, device=device)
    np_axis = None if axis is None else tuple(axis)
    _close(sluice.sum(x, axis=axis, keepdim=keepdim), a.sum(axis=np_axis, keepdims=keepdim),
           atol=1e-4)
    _close(sluice.mean(x, axis=axis, keepdim=keepdim), a.mean(axis=np_axis, keepdims=keepdim))


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_and_losses(ctx, rng, device):
    a = _f(rng, 6, 4)
    labels = rng.integers(0, 4, size=(6, 1)).astype(np.int64)
    x = sluice.tensor(a, device=device)
    e = np.exp(a - a.max(-1, keepdims=True))
    sm = e / e.sum(-1, keepdims=True)
    _close(sluice.softmax(x), sm)
    _close(sluice.softmax(x, axis=0), np.exp(a) / np.exp(a).sum(0, keepdims=True))
    loss, softmax = sluice.softmax_with_cross_entropy(x, sluice.tensor(labels, device=device),
                                                   return_softmax=True)
    _close(softmax, sm)
    _close(loss, -np.log(np.take_along_axis(sm, labels, axis=1)))
    b = _f(rng, 6, 4)
    _close(sluice.mse_loss(x, sluice.tensor(b, device=device)), np.mean((a - b) ** 2))
    _close(sluice.nn.MSELoss()(x, sluice.tensor(b, device=device)), np.mean((a - b) ** 2))


@pytest.mark.parametrize("device", DEVICES)
def test_shape_ops(ctx, rng, device):
    a, b = _f(rng, 2, 3, 4), _f(rng, 2, 3, 4)
    x, y = sluice.tensor(a, device=device), sluice.tensor(b, device=device)
    _close(sluice.reshape(x, [6, 4]), a.reshape(6, 4))
    _close(sluice.transpose(x, [2, 0, 1]), a.transpose(2, 0, 1))
    _close(sluice.concat([x, y], axis=1), np.concatenate([a, b], axis=1))
    _close(sluice.concat([x, y, x]), np.concatenate([a, b, a]))
    _close(sluice.add_n([x, y, x]), a + b + a)


@pytest.mark.parametrize("device", DEVICES)
def test_logical_ops(ctx, rng, device):
    p, q = rng.random(10) < 0.5, rng.random(10) < 0.5
    x, y = sluice.tensor(p, device=device), sluice.tensor(q, device=device)
    np.testing.assert_array_equal(np.asarray(sluice.logical_and(x, y)), p & q)
    np.testing.assert_array_equal(np.asarray(sluice.logical_or(x, y)), p | q)
    np.testing.assert_array_equal(np.asarray(sluice.logical_xor(x, y)), p ^ q)
    np.testing.assert_array_equal(np.asarray(sluice.logical_not(x)), ~p)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_comparisons(ctx, rng, dtype):
    a = rng.integers(-5, 5, size=8).astype(dtype)
    x = sluice.tensor(a)
    np.testing.assert_array_equal(np.asarray(x < 0), a < 0)
    np.testing.assert_array_equal(np.asarray(sluice.equal(x, x)), np.ones(8, bool))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_arithmetic_wraps_and_truncates(ctx, dtype):
    # add, sub, mul, div, neg, abs and relu take integers (the shape and index arithmetic of
    # ONNX models) with C++'s and ONNX's rules: +, - and * wrap around, and divide truncates
    # toward zero (not NumPy's true division). The other math ops take floats only.
    a = np.array([7, -7, 5, 0, np.iinfo(dtype).max], dtype=dtype)
    b = np.array([2, 2, -3, 4, 1], dtype=dtype)
    x, y = sluice.tensor(a), sluice.tensor(b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(np.asarray(x + y), a + b)
    np.testing.assert_array_equal(np.asarray(x - y), a - b)
    np.testing.assert_array_equal(np.asarray(x * y), a * b)
    np.testing.assert_array_equal(np.asarray(sluice.divide(x, y)), [3, -3, -1, 0, a[4]])
    np.testing.assert_array_equal(np.asarray(sluice.abs(x)), np.abs(a))
    with pytest.raises(errors.InvalidArgumentError) as info:
        sluice.sqrt(x)
    assert "sqrt" in info.value.message


@pytest.mark.parametrize("device", DEVICES)
def test_call_by_op_name(ctx, rng, device):
    a = _f(rng, 3, 2)
    x = sluice.tensor(a, device=device)
    _close(sluice.call("scale", x, scale=2.0, bias=0.5), 2 * a + 0.5)
    _close(sluice.call("scale", x, scale=3), 3 * a)            # ints widen to float attrs
    _close(sluice.call("sum", [x, x, x]), 3 * a)               # a variadic slot
    _close(sluice.call("relu", x), np.maximum(a, 0))
    cast = sluice.call("cast", x, dtype="int32")
    assert cast.dtype == "i32"
    np.testing.assert_array_equal(np.asarray(cast), a.astype(np.int32))
    filled = sluice.call("fill_constant", shape=[2, 2], value=3.0, dtype="float32",
                         context=ctx, device=device)
    assert filled.device == device
    _close(filled, np.full((2, 2), 3.0))


@pytest.mark.parametrize("device", ["cpu", "sim:0", "sim:1"])
def test_creation(ctx, device):
    f = sluice.full([2, 3], 7.5, device=device)
    assert f.device == device and f.dtype == "f32"
    _close(f, np.full((2, 3), 7.5))
    assert sluice.zeros([4], dtype="int64", device=device).dtype == "i64"
    np.testing.assert_array_equal(np.asarray(sluice.zeros(4, device=device)), np.zeros(4))
    np.testing.assert_array_equal(np.asarray(sluice.ones([2], dtype="bool", device=device)),
                                  [True, True])
    np.testing.assert_array_equal(np.asarray(sluice.ones([2, 2], dtype="float64")), np.ones((2, 2)))


def test_seeded_random_is_the_same_on_every_device(ctx):
    u = [np.asarray(sluice.rand([64], seed=11, device=d)) for d in ("cpu", "sim:0", "sim:1")]
    for other in u[1:]:
        np.testing.assert_array_equal(u[0], other)
    assert u[0].min() >= 0.0 and u[0].max() < 1.0
    w = np.asarray(sluice.rand([1000], min=-2.0, max=3.0, seed=5))
    assert w.min() >= -2.0 and w.max() < 3.0 and abs(w.mean() - 0.5) < 0.2
    g = np.asarray(sluice.randn([4000], mean=1.0, std=2.0, seed=3))
    assert abs(g.mean() - 1.0) < 0.15 and abs(g.std() - 2.0) < 0.15
    assert not np.array_equal(np.asarray(sluice.rand([64], seed=12)), u[0])


def test_devices(ctx):
    assert sluice.devices() == ["cpu", "sim:0", "sim:1"]
    assert sluice.devices(sluice.Context(sim_devices=1)) == ["cpu", "sim:0"]


@pytest.mark.parametrize("stream", ["sim:0/compute:0", "sim:0/compute:1"])
def test_stream_scope(checked_ctx, rng, stream):
    a = _f(rng, 16, 16)
    x = sluice.tensor(a, device="sim:0")
    with sluice.stream(stream):
        y = sluice.relu(x @ x) + 1.0
    z = y * 2.0          # back on the default stream: ordered after y
    _close(z, 2 * (np.maximum(a @ a, 0) + 1), atol=1e-4)
    sluice.sync()


def test_many_small_ops_with_jitter_are_race_free(rng):
    context = sluice.Context(sim_devices=2, check_sync=True, sim_jitter_us=30, sim_seed=7)
    a = _f(rng, 8, 8) * 0.3
    with context:
        x = sluice.tensor(a, device="sim:0")
        want = a.copy()
        for i in range(20):
            with sluice.stream(f"sim:0/compute:{i % 2}"):
                x = sluice.tanh(x @ x) + 0.1
            want = np.tanh(want @ want) + 0.1
        moved = x.to("sim:1").to("cpu")
        _close(moved, want, atol=1e-4)
        sluice.sync()
    assert context.sync_violations() == 0


@pytest.mark.parametrize("scheduling", ["dedicated", "caller"])
def test_scheduling_modes(rng, scheduling):
    context = sluice.Context(sim_devices=1, scheduling=scheduling)
    a = _f(rng, 4, 4)
    x = sluice.tensor(a, device="sim:0", context=context)
    _close(sluice.relu(x @ x), np.maximum(a @ a, 0))


def test_tensors_of_two_contexts_stay_apart(rng):
    one, two = sluice.Context(sim_devices=1), sluice.Context(sim_devices=1)
    a = _f(rng, 3)
    with one:
        x = sluice.tensor(a)
    with two:
        y = sluice.tensor(a * 2)
    assert x.context is not None and y.context is not None
    _close(x + 1.0, a + 1)
    _close(y + 1.0, a * 2 + 1)
