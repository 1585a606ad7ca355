"""The seed example (Paddle's static example with only its imports changed) trains, and a
program saved from Python gives the same losses under the `sluice run` command."""

import math
import pathlib
import re
import runpy
import subprocess

import numpy as np
import pytest

import sluice
from sluice import static

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "seed_example.py"


def test_seed_example_trains():
    g = runpy.run_path(str(EXAMPLE))
    try:
        (first,) = g["ret"]
        assert first.shape == () and np.isfinite(first)
        exe, main_program, loss = g["exe"], g["main_program"], g["loss"]
        feed = {"x": np.ones((16, 16), np.float32), "label": np.ones((16, 1), np.float32)}
        losses = [float(first)]
        for _ in range(20):
            (value,) = exe.run(main_program, feed=feed, fetch_list=[loss])
            losses.append(float(value))
        assert all(b < a for a, b in zip(losses, losses[1:])), losses
        assert losses[-1] < 0.95 * losses[0]
    finally:
        sluice.disable_static()


# `sluice run` prints one line per step: "step N  NAME=f32[] [VALUE]  ..." (%.6g values).
STEP_LINE = re.compile(r"^step (\d+)((?:\s+\S+=\S+\[[^\]]*\] \[[^\]]*\])+)\s*$")
FETCH = re.compile(r"(\S+)=(\w+)\[([^\]]*)\] \[([^\]]*)\]")


def parse_run_output(stdout):
    """{step: {name: [values]}} from `sluice run`'s output."""
    steps = {}
    for line in stdout.splitlines():
        m = STEP_LINE.match(line)
        if not m:
            continue
        fetched = {}
        for name, _dtype, _shape, values in FETCH.findall(m.group(2)):
            fetched[name] = [float(v) for v in values.replace("...", "").split(",") if v.strip()]
        steps[int(m.group(1))] = fetched
    return steps


def _printed_ulp(value):
    """Half a unit in the last place of `value` printed with %.6g."""
    if value == 0:
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - 5)


@pytest.fixture
def saved_run(tmp_path):
    """A small program trained 5 steps from Python, and the files `sluice run` needs for the
    same 5 steps: fixed weights (set in the scope, saved as persistables) and fixed data."""
    rng = np.random.default_rng(20)
    X = rng.standard_normal((16, 4)).astype(np.float32)
    Y = (X @ rng.standard_normal((4, 1)) + 0.2).astype(np.float32)
    W0 = (rng.standard_normal((4, 1)) * 0.3).astype(np.float32)
    B0 = np.array([0.05], np.float32)
    context = sluice.Context(sim_devices=2)
    with context:
        main, startup = static.Program(), static.Program()
        with static.program_guard(main, startup):
            x = static.data("x", [16, 4])
            y = static.data("y", [16, 1])
            lin = sluice.nn.Linear(4, 1)
            loss = sluice.nn.MSELoss()(sluice.tanh(lin(x)) + lin(x), y)
            sluice.optimizer.Adam(learning_rate=0.05).minimize(loss)
        scope = static.Scope()
        exe = static.Executor(sluice.CPUPlace())
        exe.run(startup, scope=scope)
        scope.find_var(lin.weight.name).get_tensor().set(W0, sluice.CPUPlace())
        scope.find_var(lin.bias.name).get_tensor().set(B0, sluice.CPUPlace())
        main.save(str(tmp_path / "main.program"))
        startup.save(str(tmp_path / "startup.program"))
        static.save_persistables(exe, str(tmp_path / "params"), main, scope)
        np.save(tmp_path / "x.npy", X)
        np.save(tmp_path / "y.npy", Y)
        losses = [float(exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)[0])
                  for _ in range(5)]
        params = {p.name: np.array(scope.find_var(p.name).get_tensor())
                  for p in (lin.weight, lin.bias)}
    return tmp_path, loss.name, losses, params


def _run_cli(cli, tmp_path, loss_name, *extra):
    args = [cli, "run", str(tmp_path / "main.program"),
            "--startup", str(tmp_path / "startup.program"),
            "--load", str(tmp_path / "params"),
            "--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"y={tmp_path / 'y.npy'}",
            "--fetch", loss_name, "--steps", "5", *extra]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("device_args", [(), ("--device", "sim:0", "--streams", "2",
                                              "--sync-check")], ids=["cpu", "sim0-2streams"])
def test_cli_run_gives_the_python_losses(sluice_cli, saved_run, device_args):
    tmp_path, loss_name, losses, params = saved_run
    out_dir = tmp_path / ("after-" + ("cpu" if not device_args else "sim"))
    stdout = _run_cli(sluice_cli, tmp_path, loss_name, "--save", str(out_dir), *device_args)
    steps = parse_run_output(stdout)
    assert sorted(steps) == [1, 2, 3, 4, 5], stdout
    printed = [steps[i][loss_name][0] for i in range(1, 6)]
    # The tool prints 6 significant digits: equal within 1e-6 plus the printing's rounding.
    for got, want in zip(printed, losses):
        assert abs(got - want) <= 1e-6 + _printed_ulp(want), (printed, losses)
    # The parameters it saved after the 5 steps match Python's within 1e-6.
    for name, value in params.items():
        np.testing.assert_allclose(np.load(out_dir / f"{name}.npy"), value, atol=1e-6, rtol=0)
    if "--sync-check" in device_args:
        assert "sync check: 0 violations" in stdout


def test_cli_run_prints_round_trip_precision(sluice_cli, saved_run):
    tmp_path, loss_name, losses, _ = saved_run
    steps = parse_run_output(_run_cli(sluice_cli, tmp_path, loss_name))
    printed = [steps[i][loss_name][0] for i in range(1, 6)]
    assert [np.float32(v) for v in printed] == [np.float32(v) for v in losses]
    assert max(abs(a - b) for a, b in zip(printed, losses)) <= 1e-6


def test_parse_run_output():
    text = ("step 1  loss=f32[] [5.07989]  w=f32[4, 1] [0.1, -2, 3e-05, 4, ...]\n"
            "step 2  loss=f32[] [4.67676]  w=f32[4, 1] [0.2, -2, 3e-05, 4]\n"
            "summary: 2 steps on cpu; last step 7: ops=10\n")
    steps = parse_run_output(text)
    assert steps[1]["loss"] == [5.07989]
    assert steps[1]["w"] == [0.1, -2.0, 3e-05, 4.0]
    assert steps[2]["loss"] == [4.67676]
    assert _printed_ulp(5.07989) == pytest.approx(5e-6)
