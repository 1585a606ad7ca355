"""Ctrl-C cancels long runs (KeyboardInterrupt, the scope and executor stay usable), and
waits release the GIL so other Python threads make progress."""

import signal
import threading
import time

import numpy as np
import pytest

import sluice
from sluice import static


@pytest.fixture(autouse=True)
def _sigint_raises_keyboard_interrupt():
    """Python's own SIGINT handler for each test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and then no interrupt would arrive."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_main_thread_after(seconds):
    """A started timer that sends SIGINT to the main thread."""
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    return timer


class _Spinner:
    """A thread that counts as fast as it can while the GIL lets it."""

    def __init__(self):
        self.count = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop:
            self.count += 1

    def __enter__(self):
        self._thread.start()
        time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        return False


def _counting_program(trip_count_var=True):
    """A program with a trained layer and a float64 counting loop to `n` (a feed)."""
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [4, 4])
        n = static.data("n", [], dtype="float64")
        lin = sluice.nn.Linear(4, 4)
        loss = sluice.mean(sluice.square(lin(x)))
        sluice.optimizer.SGD(learning_rate=0.1).minimize(loss)
        i = sluice.full([], 0.0, dtype="float64")
        (count,) = static.while_loop(lambda i: i < n, lambda i: [i + 1.0], [i])
    return main, startup, lin, loss, count


def _seconds_per_iteration(exe, main, loss, count, scope):
    feed = {"x": np.ones((4, 4), np.float32), "n": np.array(20000.0)}
    exe.run(main, feed=feed, fetch_list=[count], scope=scope)       # lower it once
    start = time.perf_counter()
    exe.run(main, feed=feed, fetch_list=[count], scope=scope)
    return max((time.perf_counter() - start) / 20000, 1e-8)


@pytest.mark.parametrize("place", ["cpu", "sim:0"])
def test_sigint_cancels_executor_run(ctx, scope, place):
    main, startup, lin, loss, count = _counting_program()
    exe = static.Executor(place)
    exe.run(startup, scope=scope)
    per_iteration = _seconds_per_iteration(exe, main, loss, count, scope)
    # A trip count that would take about 30 s (and at least 1e6 iterations).
    n = float(int(max(1e6, min(1e12, 30.0 / per_iteration))))
    feed = {"x": np.ones((4, 4), np.float32), "n": np.array(n)}
    start = time.perf_counter()
    timer = _interrupt_main_thread_after(0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            exe.run(main, feed=feed, fetch_list=[count, loss], scope=scope)
            timer.join()
            time.sleep(0.5)     # (a late signal lands here rather than in another test)
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"KeyboardInterrupt took {elapsed:.2f} s (the run would take ~30 s)"

    # The scope and the executor are usable afterwards.
    weight = np.array(scope.find_var(lin.weight.name).get_tensor())
    assert weight.shape == (4, 4) and np.isfinite(weight).all()
    got = exe.run(main, feed={"x": np.ones((4, 4), np.float32), "n": np.array(7.0)},
                  fetch_list=[count, loss], scope=scope)
    assert float(got[0]) == 7.0 and np.isfinite(got[1])
    after = np.array(scope.find_var(lin.weight.name).get_tensor())
    assert not np.array_equal(after, weight)          # that run trained the layer


def _matmul_chain(device, seconds):
    """Eager matmuls on `device` that take about `seconds` to run; returns the last."""
    n = 1024
    a = sluice.rand([n, n], seed=1, device=device) * (1.0 / n)
    (a @ a).numpy()
    start = time.perf_counter()
    c = a
    for _ in range(3):
        c = c @ a
    c.numpy()
    per_op = max((time.perf_counter() - start) / 3, 1e-5)
    count = int(min(2000, max(4, seconds / per_op)))
    c = a
    for _ in range(count):
        c = c @ a
    return c, count * per_op


def test_gil_is_released_during_executor_run(ctx, scope):
    main, startup, lin, loss, count = _counting_program()
    exe = static.Executor("cpu")
    exe.run(startup, scope=scope)
    per_iteration = _seconds_per_iteration(exe, main, loss, count, scope)
    n = float(int(max(1e5, min(1e10, 0.6 / per_iteration))))
    with _Spinner() as spinner:
        before = spinner.count
        start = time.perf_counter()
        (value,) = exe.run(main, feed={"x": np.ones((4, 4), np.float32), "n": np.array(n)},
                           fetch_list=[count], scope=scope)
        elapsed = time.perf_counter() - start
        advanced = spinner.count - before
    assert float(value) == n
    assert elapsed > 0.1
    assert advanced > 50_000, f"the other thread counted {advanced} in {elapsed:.2f} s"


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_gil_is_released_during_eager_wait(ctx, device):
    c, expected = _matmul_chain(device, 0.6)
    with _Spinner() as spinner:
        before = spinner.count
        start = time.perf_counter()
        values = c.numpy()
        elapsed = time.perf_counter() - start
        advanced = spinner.count - before
    assert np.isfinite(values).all()
    assert elapsed > 0.1
    assert advanced > 50_000, f"the other thread counted {advanced} in {elapsed:.2f} s"


def test_sigint_interrupts_eager_wait(ctx):
    c, expected = _matmul_chain("sim:0", 2.5)
    start = time.perf_counter()
    timer = _interrupt_main_thread_after(0.2)
    interrupted = waited = False
    try:
        try:
            c.numpy()
            waited = True
            timer.join()
            time.sleep(0.3)
        except KeyboardInterrupt:
            interrupted = True
    finally:
        timer.cancel()
    elapsed = time.perf_counter() - start
    sluice.sync()
    assert interrupted and not waited, "the wait ran to its end before the interrupt"
    assert elapsed < 0.5 * expected + 0.5, (
        f"KeyboardInterrupt after {elapsed:.2f} s; the computation takes ~{expected:.1f} s")
