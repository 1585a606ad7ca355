"""What the Python benchmarks share: rounds of each implementation, interleaved, by default
each round in a fresh interpreter (so that one library's thread pools cannot slow
another's), and the medians.

A benchmark script defines `makers` (name -> function returning a zero-argument timing
closure that returns seconds per unit, or raising ImportError when the library is missing)
and calls `main(makers, parser, unit, scale, describe)`.
"""

import argparse
import statistics
import subprocess
import sys


def add_common_arguments(parser, names, default_rounds):
    parser.add_argument("--rounds", type=int, default=default_rounds)
    parser.add_argument("--only", default="", help="comma-separated subset: " + ",".join(names))
    parser.add_argument("--in-process", action="store_true",
                        help="run every implementation in this process (by default each "
                             "round of each runs in a fresh subprocess)")
    parser.add_argument("--print-seconds", action="store_true", help=argparse.SUPPRESS)


def _selected(names, only):
    return [n for n in names if not only or n in only.split(",")]


def _in_process(makers, args, make_args):
    impls = {}
    for name in _selected(list(makers), args.only):
        try:
            impls[name] = makers[name](*make_args)
        except ImportError as e:
            print(f"{name}: not importable ({e}); skipped")
    return impls


def _isolated(script, names, args):
    """Each round of each implementation in a fresh interpreter, interleaved."""
    passthrough, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--rounds", "--only"):
            skip = True
        elif not a.startswith(("--rounds=", "--only=")):
            passthrough.append(a)
    times = {}
    for _ in range(args.rounds):
        for name in _selected(names, args.only):
            out = subprocess.run(
                [sys.executable, script, "--print-seconds", "--only", name] + passthrough,
                capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1:]}")
            for line in out.stdout.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == name:
                    times.setdefault(name, []).append(float(parts[1]))
                elif line.endswith("skipped"):
                    print(line)
    return times


def run(script, makers, args, make_args, unit, scale, per_round):
    """Runs the rounds and prints each implementation's median per `unit` (seconds times
    `scale`), its range, and the ratios against sluice."""
    if args.print_seconds:
        for name, timed in _in_process(makers, args, make_args).items():
            print(f"{name} {timed()!r}")
        return
    if args.in_process:
        impls = _in_process(makers, args, make_args)
        times = {name: [] for name in impls}
        for _ in range(args.rounds):
            for name, timed in impls.items():
                times[name].append(timed())
    else:
        times = _isolated(script, list(makers), args)
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, m in medians.items():
        print(f"{name:7s} {m * scale:9.1f} {unit}  (range {min(times[name]) * scale:.1f}-"
              f"{max(times[name]) * scale:.1f}, {args.rounds} rounds x {per_round})")
    if "sluice" in medians:
        for name, m in medians.items():
            if name != "sluice":
                print(f"{name} / sluice: {m / medians['sluice']:.2f}x")
