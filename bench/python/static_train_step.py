"""The seed's example model (Linear(16->1) + MSELoss + Adam) trained from Python through
the static Executor, one `exe.run(main, feed=..., fetch_list=[loss])` per step: sluice
and, when importable by the same interpreter, PaddlePaddle's static Executor on the same
program, in interleaved rounds (rounds.py). Prints the per-step median of each and
Paddle's time over sluice's.

    python bench/python/static_train_step.py [--steps 2000] [--rounds 7] [--place cpu]
"""

import argparse
import time

import numpy as np

import rounds


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


def _maker(name):
    def make(steps, place):
        lib = __import__(name)
        return build_and_time(lib, steps, place if name == "sluice" else "cpu")

    return make


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--place", default="cpu", help="sluice place: cpu or sim:N")
    makers = {"sluice": _maker("sluice"), "paddle": _maker("paddle")}
    rounds.add_common_arguments(parser, list(makers), default_rounds=7)
    args = parser.parse_args()
    rounds.run(__file__, makers, args, (args.steps, args.place), "us/step", 1e6, args.steps)


if __name__ == "__main__":
    main()
