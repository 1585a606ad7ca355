"""Python-level eager tiny add: `c = a + b` on 1-element float32 tensors, the result kept
(each iteration drops the previous one), repeated N times, then one read of the result.
Measures sluice and, when importable in the same interpreter, NumPy and PaddlePaddle
(dygraph, cpu) in interleaved rounds; prints the per-op median of each and the ratios.

    python bench/python/tiny_add.py [--n 200000] [--rounds 9] [--device cpu]
"""

import argparse
import statistics
import time


def bench_sluice(n, device):
    import numpy as np
    import sluice

    a = sluice.tensor(np.ones((1,), np.float32), device=device)
    b = sluice.tensor(np.ones((1,), np.float32), device=device)
    c = a + b
    c.numpy()

    def run():
        c = None
        t = time.perf_counter()
        for _ in range(n):
            c = a + b
        c.numpy()
        return (time.perf_counter() - t) / n

    return run


def bench_numpy(n, device):
    import numpy as np

    a = np.ones((1,), np.float32)
    b = np.ones((1,), np.float32)

    def run():
        t = time.perf_counter()
        for _ in range(n):
            c = a + b  # noqa: F841
        return (time.perf_counter() - t) / n

    return run


def bench_paddle(n, device):
    import paddle

    paddle.set_device("cpu")
    a = paddle.to_tensor([1.0], dtype="float32")
    b = paddle.to_tensor([1.0], dtype="float32")

    def run():
        c = None
        t = time.perf_counter()
        for _ in range(n):
            c = a + b
        c.numpy()
        return (time.perf_counter() - t) / n

    return run


NAMES = ("sluice", "numpy", "paddle")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200000, help="adds per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--device", default="cpu", help="sluice device (cpu, sim:0)")
    parser.add_argument("--only", default="", help="comma-separated subset: sluice,numpy,paddle")
    parser.add_argument("--in-process", action="store_true",
                        help="run every implementation in this process (by default each "
                             "round of each runs in a fresh subprocess, so that one library's "
                             "thread pools cannot slow another's)")
    parser.add_argument("--print-seconds", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.in_process and not args.print_seconds:
        return isolated(args)
    impls = {}
    for name, make in (("sluice", bench_sluice), ("numpy", bench_numpy), ("paddle", bench_paddle)):
        if args.only and name not in args.only.split(","):
            continue
        try:
            impls[name] = make(args.n, args.device)
        except ImportError as e:
            print(f"{name}: not importable ({e}); skipped")
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
        lo, hi = min(times[name]), max(times[name])
        print(f"{name:7s} {m * 1e9:8.0f} ns/op  (range {lo * 1e9:.0f}-{hi * 1e9:.0f}, "
              f"{args.rounds} rounds x {args.n})")
    if "sluice" in medians:
        for name in medians:
            if name != "sluice":
                print(f"sluice / {name}: {medians['sluice'] / medians[name]:.2f}x")


if __name__ == "__main__":
    main()
