"""The functional ops generated from the op table (framework/builder/op_api.toml): every name
the table gives is a function of the package and of its stub, and the ops Python gained from
the table (abs, neg, pow, clip, maximum, minimum, log_softmax, split, assign, zeros_like)
compute what NumPy does, eagerly and in a static program."""

import numpy as np
import pytest

import sluice
from sluice import _ops

from conftest import DEVICES


def test_every_table_name_is_exported():
    assert len(_ops.__all__) >= 40
    for name in _ops.__all__:
        assert callable(getattr(sluice, name)), name
    for name in ("abs", "neg", "pow", "clip", "maximum", "minimum", "relu", "matmul", "add_n"):
        assert name in _ops.__all__, name


def test_docstrings_come_from_the_table():
    assert "NumPy broadcasting" in sluice.add.__doc__
    assert "factor" in sluice.pow.__doc__


@pytest.mark.parametrize("device", DEVICES)
def test_new_ops_match_numpy(ctx, rng, device):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    x = sluice.tensor(a, device=device)
    y = sluice.tensor(b, device=device)
    cases = [
        (sluice.abs(x), np.abs(a)),
        (sluice.neg(x), -a),
        (sluice.pow(sluice.abs(x), 2.5), np.abs(a) ** 2.5),
        (sluice.pow(x, 2.0), a ** 2),
        (sluice.clip(x, -0.5, 0.25), np.clip(a, -0.5, 0.25)),
        (sluice.maximum(x, y), np.maximum(a, b)),
        (sluice.minimum(x, y), np.minimum(a, b)),
        (sluice.assign(x), a),
        (sluice.zeros_like(x), np.zeros_like(a)),
        (sluice.log_softmax(x, axis=1),
         a - a.max(1, keepdims=True) - np.log(np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True))),
    ]
    for got, want in cases:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    pieces = sluice.split(x, 2, axis=1)
    assert len(pieces) == 2
    np.testing.assert_array_equal(np.asarray(pieces[1]), a[:, 2:])


def test_pow_in_a_static_program(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    main, startup = sluice.static.Program(), sluice.static.Program()
    with sluice.static.program_guard(main, startup):
        x = sluice.static.data("x", [2, 3])
        out = sluice.neg(sluice.pow(sluice.abs(x), 3.0))
    exe = sluice.static.Executor(sluice.CPUPlace())
    scope = sluice.static.Scope()
    exe.run(startup, scope=scope)
    (got,) = exe.run(main, feed={"x": a}, fetch_list=[out], scope=scope)
    np.testing.assert_allclose(got, -np.abs(a) ** 3, rtol=1e-5)


def test_bad_operands_raise_naming_the_op(ctx):
    x = sluice.tensor(np.array([1, -2], np.int32))
    with pytest.raises(sluice.errors.InvalidArgumentError, match="'sqrt'"):
        sluice.sqrt(x)  # abs, neg, relu and the arithmetic take integers; sqrt does not
    with pytest.raises(TypeError):
        sluice.pow(x)  # factor is required


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_functions_write_their_first_operand(ctx, rng, device):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    y = sluice.tensor(b, device=device)
    cases = [
        (lambda x: sluice.add_(x, y), a + b),
        (lambda x: sluice.multiply_(x, y), a * b),
        (lambda x: sluice.scale_(x, scale=2.0, bias=-1.0), np.float32(2.0) * a - np.float32(1.0)),
        (lambda x: sluice.relu_(x), np.maximum(a, 0)),
    ]
    for call, want in cases:
        x = sluice.tensor(a, device=device)
        assert call(x) is x  # returns its first operand
        np.testing.assert_array_equal(np.asarray(x), want)
    np.testing.assert_array_equal(np.asarray(y), b)  # the other operand is untouched


def test_in_place_functions_refuse_variables_and_recorded_leaves(ctx):
    main, startup = sluice.static.Program(), sluice.static.Program()
    with sluice.static.program_guard(main, startup):
        v = sluice.static.data("v", [2])
        with pytest.raises(TypeError, match="add_: x must be an eager sluice Tensor"):
            sluice.add_(v, v)
    w = sluice.tensor(np.array([1.0, -1.0], np.float32), requires_grad=True)
    with pytest.raises(sluice.errors.FailedPreconditionError, match="'relu' writes in place"):
        sluice.relu_(w)
    x = sluice.tensor(np.array([3.0, 4.0], np.float32))
    with pytest.raises(sluice.errors.FailedPreconditionError, match="reads input 1"):
        sluice.add_(x, w)  # not recorded: w's gradient would be lost
    np.testing.assert_array_equal(np.asarray(x), [3.0, 4.0])
    np.testing.assert_array_equal(np.asarray(w), [1.0, -1.0])
    with sluice.no_grad():
        sluice.relu_(w)
    np.testing.assert_array_equal(np.asarray(w), [1.0, 0.0])


def test_a_saved_operand_changed_in_place_fails_backward(ctx):
    x = sluice.tensor(np.array([2.0, 3.0], np.float32))
    w = sluice.tensor(np.array([0.5, 0.25], np.float32), requires_grad=True)
    loss = sluice.sum(sluice.multiply(x, w))
    sluice.add_(x, sluice.tensor(np.array([1.0, 1.0], np.float32)))
    with pytest.raises(sluice.errors.FailedPreconditionError, match="modified in place"):
        loss.backward()


def _linear(x):
    """The seed's model: Linear(16 -> 1)."""
    return sluice.nn.Linear(in_features=16, out_features=1)(x)


def _gated(x):
    """A hidden value feeding tanh and sigmoid: its gradient has two contributions, summed."""
    h = sluice.nn.Linear(in_features=16, out_features=16)(x)
    return _linear(sluice.add(sluice.tanh(h), sluice.sigmoid(h)))


def _train_losses(strategy, model=_linear):
    """Five Adam steps of `model` (x -> prediction) with `strategy`, unfused; the losses and
    the last lowering."""
    main, startup = sluice.static.Program(), sluice.static.Program()
    with sluice.static.program_guard(main, startup):
        x = sluice.static.data(shape=[16, 16], name="x")
        label = sluice.static.data(shape=[16, 1], name="label")
        loss = sluice.nn.MSELoss()(model(x), label)
        sluice.optimizer.Adam().minimize(loss)
    exe = sluice.static.Executor(sluice.CPUPlace(), compile_subgraphs=False,
                                 build_strategy=strategy)
    scope = sluice.static.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((16, 16)).astype(np.float32),
            "label": rng.standard_normal((16, 1)).astype(np.float32)}
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0] for _ in range(5)]
    return losses, exe._exe.last_lowering()


def test_build_strategy_inplace_gives_the_same_losses(ctx):
    on, off = sluice.static.BuildStrategy(), sluice.static.BuildStrategy()
    assert on.enable_inplace and not on.enable_addto
    off.enable_inplace = False
    losses_on, lowering_on = _train_losses(on)
    losses_off, lowering_off = _train_losses(off)
    np.testing.assert_array_equal(np.array(losses_on), np.array(losses_off))
    assert lowering_off["inplace_reuses"] == 0
    assert lowering_on["inplace_reuses"] > 0
    assert lowering_on["peak_temporary_bytes"] > 0


def test_build_strategy_addto_gives_the_same_losses(ctx):
    on, off = sluice.static.BuildStrategy(), sluice.static.BuildStrategy()
    on.enable_addto = True
    losses_on, lowering_on = _train_losses(on, _gated)
    losses_off, lowering_off = _train_losses(off, _gated)
    np.testing.assert_array_equal(np.array(losses_on), np.array(losses_off))
    assert losses_on[0] != losses_on[-1]
    assert lowering_off["addto_sums"] == 0
    assert lowering_on["addto_sums"] == 1
    assert lowering_on["addto_writes"] == 1


def test_build_strategy_refuses_other_objects(ctx):
    with pytest.raises(TypeError, match="BuildStrategy"):
        sluice.static.Executor(sluice.CPUPlace(), build_strategy={"enable_inplace": True})
