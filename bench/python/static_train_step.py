"""The seed's example model (Linear(16->1) + MSELoss + Adam) trained from Python through
the static Executor, one `exe.run(main, feed=..., fetch_list=[loss])` per step: sluice
and, when importable in the same interpreter, PaddlePaddle's static Executor on the same
program, in interleaved rounds. Prints the per-step median of each and the ratio.

    python bench/python/static_train_step.py [--steps 2000] [--rounds 7] [--place cpu]
"""

import argparse
import statistics
import time

import numpy as np


def build_and_time(lib, steps, place_name):
    """The seed's program built with `lib` (sluice or paddle); returns a timing closure."""
    lib.enable_static()
    static = lib.static
    main_program, startup_program = static.Program(), static.Program()
    with static.program_guard(main_program, startup_program):
        x = static.data(shape=[16, 16], name="x")
        label = static.data(shape=[16, 1], name="label")
        out = lib.nn.Linear(in_features=16, out_features=1)(x)
        loss = lib.nn.MSELoss()(out, label)
        lib.optimizer.Adam().minimize(loss)
    if place_name == "cpu":
        place = lib.CPUPlace()
    else:
        place = lib.SimPlace(int(place_name.split(":")[1]))
    exe = static.Executor(place)
    exe.run(startup_program)
    feed = {"x": np.ones((16, 16), np.float32), "label": np.ones((16, 1), np.float32)}
    for _ in range(50):
        exe.run(main_program, feed=feed, fetch_list=[loss])
    lib.disable_static()

    def run():
        lib.enable_static()
        t = time.perf_counter()
        for _ in range(steps):
            exe.run(main_program, feed=feed, fetch_list=[loss])
        dt = (time.perf_counter() - t) / steps
        lib.disable_static()
        return dt

    return run


NAMES = ("sluice", "paddle")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--place", default="cpu", help="sluice place: cpu or sim:N")
    parser.add_argument("--only", default="", help="comma-separated subset: sluice,paddle")
    parser.add_argument("--in-process", action="store_true",
                        help="run every implementation in this process (by default each "
                             "round of each runs in a fresh subprocess, so that one library's "
                             "thread pools cannot slow another's)")
    parser.add_argument("--print-seconds", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.in_process and not args.print_seconds:
        return isolated(args)
    impls = {}
    for name in ("sluice", "paddle"):
        if args.only and name not in args.only.split(","):
            continue
        try:
            lib = __import__(name)
        except ImportError as e:
            print(f"{name}: not importable ({e}); skipped")
            continue
        impls[name] = build_and_time(lib, args.steps, args.place if name == "sluice" else "cpu")
    if args.print_seconds:
        for name, run in impls.items():
            print(f"{name} {run()!r}")
        return
    times = {name: [] for name in impls}
    for _ in range(args.rounds):
        for name, run in impls.items():
            times[name].append(run())
    report(times, args)


def isolated(args):
    """Each round of each implementation in a fresh interpreter, interleaved."""
    import subprocess
    import sys

    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    times = {}
    passthrough, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--rounds", "--only"):
            skip = True
        elif not a.startswith(("--rounds=", "--only=")):
            passthrough.append(a)
    for _ in range(args.rounds):
        for name in names:
            out = subprocess.run(
                [sys.executable, __file__, "--print-seconds", "--only", name] + passthrough,
                capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1:]}")
            for line in out.stdout.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == name:
                    times.setdefault(name, []).append(float(parts[1]))
                elif line.endswith("skipped"):
                    print(line)
    report(times, args)


def report(times, args):
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, m in medians.items():
        print(f"{name:7s} {m * 1e6:8.1f} us/step  (range {min(times[name]) * 1e6:.1f}-"
              f"{max(times[name]) * 1e6:.1f}, {args.rounds} rounds x {args.steps})")
    if "sluice" in medians and "paddle" in medians:
        print(f"paddle / sluice: {medians['paddle'] / medians['sluice']:.2f}x")


if __name__ == "__main__":
    main()
