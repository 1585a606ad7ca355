"""Guards, scopes and graphs used the ways threads and Python's object lifetimes allow:
a guard exited on another thread is refused (not a crash), a shared scope serves several
threads, a graph is collectable, a graph traced on one thread can be called from another
meanwhile, a Variable kept from an ended trace is refused, and Variable arithmetic with
numbers appends to the Variable's own program."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import sluice
from sluice import errors, static


def _on_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the thread did not finish"
    return box


def test_guards_exited_on_another_thread_are_refused(ctx):
    main, startup = static.Program(), static.Program()
    guard = static.program_guard(main, startup)
    guard.__enter__()
    box = _on_thread(lambda: guard.__exit__(None, None, None))
    assert isinstance(box.get("error"), ValueError), box
    guard.__exit__(None, None, None)  # the entering thread still can
    stream = sluice.stream("sim:0/compute:1")
    stream.__enter__()
    box = _on_thread(lambda: stream.__exit__(None, None, None))
    assert isinstance(box.get("error"), ValueError), box
    stream.__exit__(None, None, None)


def test_no_grad_entered_twice_nested_restores_recording(ctx):
    x = sluice.tensor(np.ones(2, np.float32), requires_grad=True)
    ng = sluice.no_grad()
    with ng:
        with ng:
            assert not (x * 2.0).requires_grad
        assert not (x * 2.0).requires_grad  # still inside the outer block
    assert (x * 2.0).requires_grad


def test_stress_options_out_of_range_are_errors_not_crashes():
    for bad in ({"streams": 0}, {"tensors": 0}, {"sim_devices": 0}, {"elements": 0}):
        with pytest.raises(errors.InvalidArgumentError) as info:
            sluice.vm.stress(programs=1, **bad)
        assert next(iter(bad)) in info.value.message
    with pytest.raises(errors.InvalidArgumentError):
        sluice.vm.stress_control_flow(programs=1, inputs=0)


def _seed_program():
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [16, 16])
        y = static.data("y", [16, 1])
        loss = sluice.nn.MSELoss()(sluice.nn.Linear(16, 1)(x), y)
        sluice.optimizer.SGD(learning_rate=0.01).minimize(loss)
    return main, startup, loss


def test_threads_share_one_scope(ctx):
    scope = static.Scope()
    programs = [_seed_program() for _ in range(2)]
    for main, startup, _ in programs:
        static.Executor(sluice.CPUPlace()).run(startup, scope=scope)
    feed = {"x": np.ones((16, 16), np.float32), "y": np.zeros((16, 1), np.float32)}
    results = [[] for _ in programs]

    context = sluice.current_context()  # `with ctx:` is per thread: hand it over

    def train(k):
        main, _, loss = programs[k]
        exe = static.Executor(sluice.CPUPlace(), context=context)
        for _ in range(50):
            results[k].append(float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]))
            scope.var(f"t{k}").get_tensor().set(np.full(3, k, np.float32))

    threads = [threading.Thread(target=train, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k, losses in enumerate(results):
        assert len(losses) == 50 and losses[-1] < losses[0], (k, losses[:3], losses[-3:])
        np.testing.assert_array_equal(np.asarray(scope.find_var(f"t{k}").get_tensor()),
                                      np.full(3, k, np.float32))


class _Step(sluice.nn.Graph):
    def __init__(self, layer, pause=0.0):
        super().__init__()
        self.layer = layer
        self.pause = pause

    def build(self, x, y):
        if self.pause:
            time.sleep(self.pause)  # releases the GIL while tracing
        loss = sluice.nn.MSELoss()(self.layer(x), y)
        sluice.optimizer.SGD(learning_rate=0.05).minimize(loss)
        return loss


def test_a_graph_is_collectable(ctx):
    step = _Step(sluice.nn.Linear(4, 1, seed=1))
    x = sluice.tensor(np.ones((2, 4), np.float32))
    y = sluice.tensor(np.zeros((2, 1), np.float32))
    step(x, y).numpy()
    ref = weakref.ref(step)
    del step
    gc.collect()
    assert ref() is None


def test_a_graph_called_from_another_thread_while_tracing(ctx):
    step = _Step(sluice.nn.Linear(4, 1, seed=2), pause=0.3)
    x = sluice.tensor(np.ones((2, 4), np.float32))
    y = sluice.tensor(np.zeros((2, 1), np.float32))
    first = threading.Thread(target=lambda: step(x, y).numpy())
    first.start()
    time.sleep(0.1)  # the first call is tracing now
    box = _on_thread(lambda: float(step(x, y).item()))
    first.join(30)
    assert not first.is_alive()
    assert "error" not in box, box
    assert step.stats()["traces"] == 1


def test_a_variable_kept_from_an_ended_trace_is_refused(ctx):
    kept = []

    class Failing(sluice.nn.Graph):
        def build(self, x):
            if not kept:
                kept.append(x)
                raise ValueError("first build fails")
            return kept[0] * 2.0  # a variable of the first, ended trace

    g = Failing()
    with pytest.raises(ValueError):
        g(sluice.tensor(np.ones(2, np.float32)))
    with pytest.raises(errors.FailedPreconditionError) as info:
        g(sluice.tensor(np.ones(3, np.float32)))
    assert "ended" in info.value.message
    assert "ended graph trace" in repr(kept[0])


def test_variable_arithmetic_with_numbers_appends_to_its_own_program(ctx):
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [3])
    y = x / 2.0  # outside every guard: into x's program
    z = x < 1.5
    assert "fill_constant" in main.op_types()
    out = static.Executor(sluice.CPUPlace()).run(
        main, feed={"x": np.array([1, 2, 3], np.float32)}, fetch_list=[y, z],
        scope=static.Scope())
    np.testing.assert_array_equal(out[0], [0.5, 1.0, 1.5])
    np.testing.assert_array_equal(out[1], [True, False, False])


def test_a_branch_returning_a_non_tensor_raises_type_error(ctx):
    pred = sluice.tensor(np.array(True))
    with pytest.raises(TypeError):
        sluice.cond(pred, lambda: 1.0, lambda: 2.0)


def test_reductions_take_an_int_axis(ctx):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = sluice.tensor(a)
    np.testing.assert_array_equal(np.asarray(sluice.sum(t, axis=0)), a.sum(0))
    np.testing.assert_array_equal(np.asarray(sluice.mean(t, axis=1)), a.mean(1))
