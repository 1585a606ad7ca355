"""Static programs: building, running on cpu and sim with one or two compute streams,
device-resident feeds and fetches, control flow, scopes, saving and loading."""

import numpy as np
import pytest

import sluice
from sluice import static


PLACES = [("cpu", 1), ("cpu", 2), ("sim:0", 1), ("sim:0", 2), ("sim:1", 2)]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((16, 4)).astype(np.float32)
    Y = (X @ rng.standard_normal((4, 1)) + 0.3).astype(np.float32)
    W0 = (rng.standard_normal((4, 1)) * 0.3).astype(np.float32)
    return X, Y, W0


def _build(optimizer="adam", lr=0.05):
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [16, 4])
        y = static.data("y", [16, 1])
        lin = sluice.nn.Linear(4, 1)
        h = lin(x)
        pred = sluice.tanh(h) * 0.5 + h
        loss = sluice.nn.MSELoss()(pred, y)
        opt = sluice.optimizer.Adam(lr) if optimizer == "adam" else sluice.optimizer.SGD(lr)
        opt.minimize(loss)
    return main, startup, lin, pred, loss


def _train(place, streams, steps=6, optimizer="adam", tensor_feed=False, seed=0):
    X, Y, W0 = _data(seed)
    main, startup, lin, pred, loss = _build(optimizer)
    scope = static.Scope()
    exe = static.Executor(place, compute_streams=streams)
    exe.run(startup, scope=scope)
    scope.find_var(lin.weight.name).get_tensor().set(W0, place)
    if tensor_feed:
        feed = {"x": sluice.tensor(X, device=exe.device), "y": sluice.tensor(Y, device=exe.device)}
    else:
        feed = {"x": X, "y": Y}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
              for _ in range(steps)]
    weight = np.array(scope.find_var(lin.weight.name).get_tensor())
    return losses, weight


def test_reference_training_falls(ctx):
    losses, _ = _train("cpu", 1, steps=20)
    assert all(b < a for a, b in zip(losses, losses[1:]))


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("place,streams", PLACES)
@pytest.mark.parametrize("tensor_feed", [False, True])
def test_same_losses_on_every_place(optimizer, place, streams, tensor_feed):
    with sluice.Context(sim_devices=2):
        ref_losses, ref_weight = _train("cpu", 1, optimizer=optimizer)
    context = sluice.Context(sim_devices=2, check_sync=True)
    with context:
        losses, weight = _train(place, streams, optimizer=optimizer, tensor_feed=tensor_feed)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    np.testing.assert_allclose(weight, ref_weight, rtol=1e-6, atol=1e-7)
    assert losses[-1] < losses[0]
    assert context.sync_violations() == 0


def test_sgd_matches_numpy(ctx):
    X, Y, W0 = _data(1)
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x, y = static.data("x", [16, 4]), static.data("y", [16, 1])
        lin = sluice.nn.Linear(4, 1)
        loss = sluice.nn.MSELoss()(lin(x), y)
        sluice.optimizer.SGD(learning_rate=0.1).minimize(loss)
    scope = static.Scope()
    exe = static.Executor(sluice.CPUPlace())
    exe.run(startup, scope=scope)
    scope.find_var(lin.weight.name).get_tensor().set(W0)
    w, b = W0.astype(np.float64), np.zeros(1)
    for _ in range(5):
        (value,) = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
        r = X @ w + b - Y
        np.testing.assert_allclose(float(value), np.mean(r ** 2), rtol=1e-5)
        g = 2 * r / r.size
        w, b = w - 0.1 * X.T @ g, b - 0.1 * g.sum(0)
    np.testing.assert_allclose(np.array(scope.find_var(lin.weight.name).get_tensor()), w,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var(lin.bias.name).get_tensor()), b,
                               rtol=1e-5, atol=1e-6)


def test_run_with_jitter_and_two_streams_is_race_free():
    context = sluice.Context(sim_devices=2, check_sync=True, sim_jitter_us=40, sim_seed=3)
    with sluice.Context(sim_devices=2):
        ref, _ = _train("cpu", 1)
    with context:
        losses, _ = _train("sim:0", 2)
    np.testing.assert_allclose(losses, ref, rtol=1e-6)
    assert context.sync_violations() == 0


@pytest.mark.parametrize("place", ["cpu", "sim:0"])
def test_fetch_on_device_only(ctx, scope, place):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        x = static.data("x", [2, 3])
        h = x * 2.0
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = static.Executor(place)
    (t,) = exe.run(main, feed={"x": a}, fetch_list=[h], fetch_on_device=[h], scope=scope)
    assert isinstance(t, sluice.Tensor) and t.device == place
    np.testing.assert_array_equal(np.asarray(t), 2 * a)
    # The fetched tensor is an ordinary eager tensor of the context.
    np.testing.assert_array_equal(np.asarray(t + 1.0), 2 * a + 1)


@pytest.mark.parametrize("order", ["device_first", "host_first"])
def test_mixed_host_and_device_fetches(ctx, scope, order):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        x = static.data("x", [2, 3])
        h = x * 2.0
        s = sluice.sum(x)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = static.Executor("sim:0")
    fetches = [h, s] if order == "device_first" else [s, h]
    out = exe.run(main, feed={"x": a}, fetch_list=fetches, fetch_on_device=[h], scope=scope)
    got = dict(zip(["h", "s"] if order == "device_first" else ["s", "h"], out))
    assert isinstance(got["h"], sluice.Tensor) and got["h"].device == "sim:0"
    np.testing.assert_array_equal(np.asarray(got["h"]), 2 * a)
    assert isinstance(got["s"], np.ndarray)
    np.testing.assert_array_equal(got["s"], np.float32(15.0))


def test_return_numpy_false_gives_cpu_tensors(ctx, scope):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        x = static.data("x", [3])
        y = sluice.relu(x)
    exe = static.Executor(sluice.SimPlace(0))
    (t,) = exe.run(main, feed={"x": np.array([-1, 0, 2], np.float32)}, fetch_list=[y],
                   scope=scope, return_numpy=False)
    assert isinstance(t, sluice.Tensor) and t.device == "cpu"
    np.testing.assert_array_equal(np.asarray(t), [0, 0, 2])


def test_fetch_by_name_and_variable_properties(ctx, scope):
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [2, 2], dtype="float64")
        lin = sluice.nn.Linear(2, 3, dtype="float64")
        y = lin(x)
    assert x.shape == (2, 2) and x.dtype == "f64" and x.name == "x"
    assert y.shape == (2, 3)
    assert lin.weight.persistable and lin.weight.shape == (2, 3)
    assert "x" in main.var_names() and "matmul" in main.op_types()
    exe = static.Executor("cpu")
    exe.run(startup, scope=scope)
    a = np.eye(2)
    (by_name,) = exe.run(main, feed={"x": a}, fetch_list=[y.name], scope=scope)
    w = np.array(scope.find_var(lin.weight.name).get_tensor())
    np.testing.assert_allclose(by_name, a @ w)
    assert scope.find_var(lin.weight.name).get_tensor().shape() == [2, 3]


@pytest.mark.parametrize("place", [sluice.CPUPlace(), sluice.SimPlace(0), "sim:1"])
def test_scope_set_and_read(ctx, scope, rng, place):
    value = rng.standard_normal((3, 2))
    scope.var("v").get_tensor().set(value, place)
    np.testing.assert_array_equal(np.array(scope.find_var("v").get_tensor()), value)
    value2 = rng.standard_normal((3, 2))
    scope.var("v").get_tensor().set(value2, place)
    np.testing.assert_array_equal(np.array(scope.find_var("v").get_tensor()), value2)
    assert "v" in scope.var_names()


@pytest.mark.parametrize("first,second", [("cpu", "sim:0"), ("sim:0", "cpu"), ("sim:0", "sim:1")])
def test_scope_set_moves_a_variable_to_another_place(ctx, scope, rng, first, second):
    value = rng.standard_normal((3, 2))
    scope.var("v").get_tensor().set(value, first)
    scope.var("v").get_tensor().set(value * 2, second)
    np.testing.assert_array_equal(np.array(scope.find_var("v").get_tensor()), value * 2)


def test_executor_reuses_its_lowering(ctx, scope):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        x = static.data("x", [2])
        y = x * 3.0
    exe = static.Executor("cpu")
    for i in range(4):
        (v,) = exe.run(main, feed={"x": np.array([i, 1], np.float32)}, fetch_list=[y],
                       scope=scope)
        np.testing.assert_array_equal(v, [3 * i, 3])
    assert exe._exe.cache_misses == 1 and exe._exe.cache_hits == 3


@pytest.mark.parametrize("place", ["cpu", "sim:0"])
@pytest.mark.parametrize("value", [-3.0, 0.0, 2.5])
def test_static_cond(ctx, scope, place, value):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        p = static.data("p", [])
        out = static.cond(p < 0.0, lambda: p * -2.0, lambda: p + 1.0)
    exe = static.Executor(place)
    (got,) = exe.run(main, feed={"p": np.array(value, np.float32)}, fetch_list=[out], scope=scope)
    assert float(got) == (value * -2 if value < 0 else value + 1)


@pytest.mark.parametrize("place,streams", [("cpu", 1), ("sim:0", 2)])
@pytest.mark.parametrize("n", [0, 1, 17])
def test_static_while_loop(ctx, scope, place, streams, n):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        limit = static.data("n", [], dtype="float64")
        i = sluice.full([], 0.0, dtype="float64")
        s = sluice.full([], 0.0, dtype="float64")
        i_out, s_out = static.while_loop(lambda i, s: i < limit, lambda i, s: [i + 1.0, s + i],
                                         [i, s])
    exe = static.Executor(place, compute_streams=streams)
    got = exe.run(main, feed={"n": np.array(float(n))}, fetch_list=[i_out, s_out], scope=scope)
    assert float(got[0]) == n and float(got[1]) == n * (n - 1) / 2


def test_while_loop_within_max_iterations(ctx, scope):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        i = sluice.full([], 0.0)
        (out,) = static.while_loop(lambda i: i < 5.0, lambda i: [i + 1.0], [i],
                                   max_iterations=5)
    (got,) = static.Executor("cpu").run(main, fetch_list=[out], scope=scope)
    assert float(got) == 5.0


def test_while_loop_beyond_max_iterations_is_an_error(ctx, scope):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        i = sluice.full([], 0.0)
        (out,) = static.while_loop(lambda i: i < 100.0, lambda i: [i + 1.0], [i],
                                   max_iterations=5)
    with pytest.raises(sluice.errors.Error):
        static.Executor("cpu").run(main, fetch_list=[out], scope=scope)
    with pytest.raises(sluice.errors.Error):
        sluice.while_loop(lambda i: i < 100.0, lambda i: [i + 1.0], [sluice.tensor(0.0)],
                          max_iterations=5)


def test_eager_cond_and_while_loop(ctx):
    assert float(np.asarray(sluice.cond(sluice.tensor(True), lambda: sluice.tensor(2.0),
                                        lambda: sluice.tensor(3.0)))) == 2.0
    assert float(np.asarray(static.cond(sluice.tensor(False), lambda: sluice.tensor(2.0),
                                        lambda: sluice.tensor(3.0)))) == 3.0
    i, s = sluice.while_loop(lambda i, s: i < 10.0, lambda i, s: [i + 1.0, s + i],
                             [sluice.tensor(0.0), sluice.tensor(0.0)])
    assert i.item() == 10.0 and s.item() == 45.0


def test_program_text_save_and_load(ctx, scope, tmp_path):
    X, Y, W0 = _data(2)
    main, startup, lin, pred, loss = _build()
    text = main.to_text()
    assert text.startswith("sluice-program") and lin.weight.name in text
    assert str(main) == text
    main.save(str(tmp_path / "main.program"))
    startup.save(str(tmp_path / "startup.program"))
    loaded = static.load_program(str(tmp_path / "main.program"))
    loaded_startup = static.load_program(str(tmp_path / "startup.program"))
    assert loaded.to_text() == text
    assert loaded.content_hash() == main.content_hash()

    def run(program, startup_program):
        sc = static.Scope()
        exe = static.Executor("cpu")
        exe.run(startup_program, scope=sc)
        sc.find_var(lin.weight.name).get_tensor().set(W0)
        return [float(exe.run(program, feed={"x": X, "y": Y}, fetch_list=[loss.name],
                              scope=sc)[0]) for _ in range(4)]

    assert run(loaded, loaded_startup) == run(main, startup)


def test_save_and_load_persistables(ctx, tmp_path):
    X, Y, _ = _data(3)
    main, startup, lin, pred, loss = _build()
    exe = static.Executor("cpu")
    first = static.Scope()
    exe.run(startup, scope=first)
    for _ in range(3):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=first)
    static.save_persistables(exe, str(tmp_path / "params"), main, first)
    saved = {p.name: p for p in tmp_path.joinpath("params").iterdir()}
    assert lin.weight.name + ".npy" in saved and lin.bias.name + ".npy" in saved
    np.testing.assert_array_equal(np.load(saved[lin.weight.name + ".npy"]),
                                  np.array(first.find_var(lin.weight.name).get_tensor()))
    second = static.Scope()
    exe.run(startup, scope=second)
    static.load_persistables(exe, str(tmp_path / "params"), main, second)
    for name in first.var_names():
        np.testing.assert_array_equal(np.array(second.find_var(name).get_tensor()),
                                      np.array(first.find_var(name).get_tensor()), err_msg=name)
    a = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=first)[0]
    b = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=second)[0]
    assert a == b


def test_load_persistables_names_missing_files_or_loads_the_rest(ctx, tmp_path):
    X, Y, _ = _data(3)
    main, startup, lin, _, loss = _build()
    exe = static.Executor("cpu")
    first = static.Scope()
    exe.run(startup, scope=first)
    exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=first)  # moves off startup
    params = tmp_path / "params"
    static.save_persistables(exe, str(params), main, first)
    (params / (lin.bias.name + ".npy")).unlink()
    second = static.Scope()
    exe.run(startup, scope=second)
    bias_before = np.array(second.find_var(lin.bias.name).get_tensor())
    weight_before = np.array(second.find_var(lin.weight.name).get_tensor())
    with pytest.raises(static.NotFoundError, match=lin.bias.name):
        static.load_persistables(exe, str(params), main, second)
    np.testing.assert_array_equal(np.array(second.find_var(lin.weight.name).get_tensor()),
                                  weight_before)
    skipped = static.load_persistables(exe, str(params), main, second, allow_missing=True)
    assert skipped == [lin.bias.name]
    np.testing.assert_array_equal(np.array(second.find_var(lin.weight.name).get_tensor()),
                                  np.array(first.find_var(lin.weight.name).get_tensor()))
    np.testing.assert_array_equal(np.array(second.find_var(lin.bias.name).get_tensor()),
                                  bias_before)


def test_enable_static_uses_default_programs(ctx):
    sluice.enable_static()
    try:
        assert not sluice.in_dynamic_mode()
        before = len(static.default_main_program().var_names())
        x = static.data("enable_static_x", [2])
        y = sluice.relu(x)
        assert isinstance(y, static.Variable)
        assert len(static.default_main_program().var_names()) > before
    finally:
        sluice.disable_static()
    assert sluice.in_dynamic_mode()
    assert isinstance(sluice.relu(sluice.tensor([1.0])), sluice.Tensor)


def test_places():
    assert sluice.CPUPlace().device == "cpu"
    assert sluice.SimPlace(1).device == "sim:1"
    assert sluice.CUDAPlace(0).device == "cuda:0"
    assert sluice.SimPlace(1) == sluice.SimPlace(1) != sluice.SimPlace(0)
    assert len({sluice.CPUPlace(), sluice.CPUPlace()}) == 1
    assert sluice.is_compiled_with_cuda() in (True, False)
    assert static.Executor(sluice.SimPlace(1)).device == "sim:1"
