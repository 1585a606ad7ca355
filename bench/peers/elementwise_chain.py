#!/usr/bin/env python3
"""Peers of BM_Compiled_ElementwiseChain (bench/framework/compiler_benchmark.cc).

The chain y = ((((x*1.5+0.5)*x-0.25)*0.75+x)*x-1.0) on 2^24 float32 values, timed with each
peer that is installed: NumPy (unfused, one temporary per op), numexpr (fused, threads as
given), JAX (jit, XLA's fused CPU loop). Peers are for comparison only and never a
dependency of Sluice; a peer that is not installed is reported as such and skipped.

Usage: python3 bench/peers/elementwise_chain.py [--repeat N] [--threads T]
Prints one line per peer: its name, version and the median time in milliseconds.
"""
import argparse
import statistics
import time

N = 1 << 24


def median_ms(fn, repeat):
    fn()  # warm up (and for JAX: compile)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per peer (median)")
    parser.add_argument("--threads", type=int, default=2, help="numexpr threads")
    args = parser.parse_args()
    try:
        import numpy as np
    except ImportError:
        print("numpy: not installed; no peer can run")
        return
    x = np.random.default_rng(7).uniform(-1, 1, N).astype(np.float32)

    def numpy_chain():
        return ((((x * np.float32(1.5) + np.float32(0.5)) * x - np.float32(0.25)) *
                 np.float32(0.75) + x) * x - np.float32(1.0))

    print(f"numpy {np.__version__} unfused: {median_ms(numpy_chain, args.repeat):.2f} ms")
    try:
        import numexpr as ne
        ne.set_num_threads(args.threads)
        expr = "((((x*1.5+0.5)*x-0.25)*0.75+x)*x-1.0)"
        out = np.empty_like(x)
        ms = median_ms(lambda: ne.evaluate(expr, local_dict={"x": x}, out=out), args.repeat)
        print(f"numexpr {ne.__version__} fused, {args.threads} threads: {ms:.2f} ms")
    except ImportError:
        print("numexpr: not installed")
    try:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda v: ((((v * 1.5 + 0.5) * v - 0.25) * 0.75 + v) * v - 1.0))
        xj = jnp.asarray(x)
        ms = median_ms(lambda: f(xj).block_until_ready(), args.repeat)
        print(f"jax {jax.__version__} jit (XLA cpu): {ms:.2f} ms")
    except ImportError:
        print("jax: not installed")
    src = np.ones(N, dtype=np.float32)
    dst = np.empty_like(src)
    print(f"numpy copyto (memcpy of the same bytes): "
          f"{median_ms(lambda: np.copyto(dst, src), args.repeat):.2f} ms")


if __name__ == "__main__":
    main()
