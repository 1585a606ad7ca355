"""The seed example (Paddle's static example with only its imports changed) trains, and a
program saved from Python gives the same losses under the `sluice run` command."""

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


# `sluice run` prints one line per step: "step N  NAME=f32[] [VALUE]  ..." (%.9g values).
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


@pytest.fixture
def saved_run(tmp_path):
    """The seed's program (Linear(16->1) + MSELoss + Adam with Paddle's default learning
    rate), built as the example builds it, trained 5 steps from Python from fixed weights
    (set in the scope, saved as persistables) on fixed data; and the files `sluice run`
    needs for the same 5 steps."""
    rng = np.random.default_rng(20)
    X = rng.standard_normal((16, 16)).astype(np.float32)
    Y = (X @ rng.standard_normal((16, 1)) + 0.2).astype(np.float32)
    W0 = (rng.standard_normal((16, 1)) * 0.3).astype(np.float32)
    B0 = np.array([0.05], np.float32)
    context = sluice.Context(sim_devices=2)
    with context:
        main, startup = static.Program(), static.Program()
        with static.program_guard(main, startup):
            x = static.data(shape=[16, 16], name="x")
            label = static.data(shape=[16, 1], name="label")
            lin = sluice.nn.Linear(in_features=16, out_features=1)
            loss = sluice.nn.MSELoss()(lin(x), label)
            sluice.optimizer.Adam().minimize(loss)
        scope = static.Scope()
        exe = static.Executor(sluice.CPUPlace())
        exe.run(startup, scope=scope)
        scope.find_var(lin.weight.name).get_tensor().set(W0, sluice.CPUPlace())
        scope.find_var(lin.bias.name).get_tensor().set(B0, sluice.CPUPlace())
        main.save(str(tmp_path / "main.program"))
        startup.save(str(tmp_path / "startup.program"))
        static.save_persistables(exe, str(tmp_path / "params"), main, scope)
        np.save(tmp_path / "x.npy", X)
        np.save(tmp_path / "label.npy", Y)
        losses = [float(exe.run(main, feed={"x": X, "label": Y}, fetch_list=[loss],
                                scope=scope)[0]) for _ in range(5)]
        params = {p.name: np.array(scope.find_var(p.name).get_tensor())
                  for p in (lin.weight, lin.bias)}
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    return tmp_path, loss.name, losses, params


def _run_cli(cli, tmp_path, loss_name, *extra):
    args = [cli, "run", str(tmp_path / "main.program"),
            "--startup", str(tmp_path / "startup.program"),
            "--load", str(tmp_path / "params"),
            "--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"label={tmp_path / 'label.npy'}",
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
    # The tool prints the digits that round-trip a float32: equal within 1e-6.
    for got, want in zip(printed, losses):
        assert abs(got - want) <= 1e-6, (printed, losses)
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
