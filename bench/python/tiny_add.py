"""Python-level eager tiny add: `c = a + b` on 1-element float32 tensors, the result kept
(each iteration drops the previous one), repeated N times, then one read of the result.
Measures sluice and, when importable by the same interpreter, NumPy and PaddlePaddle
(dygraph, cpu) in interleaved rounds (rounds.py); prints the per-op median of each and
each peer's time over sluice's.

    python bench/python/tiny_add.py [--n 200000] [--rounds 9] [--device cpu]
"""

import argparse
import time

import rounds


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200000, help="adds per round")
    parser.add_argument("--device", default="cpu", help="sluice device (cpu, sim:0)")
    makers = {"sluice": bench_sluice, "numpy": bench_numpy, "paddle": bench_paddle}
    rounds.add_common_arguments(parser, list(makers), default_rounds=9)
    args = parser.parse_args()
    rounds.run(__file__, makers, args, (args.n, args.device), "ns/op", 1e9, args.n)


if __name__ == "__main__":
    main()
