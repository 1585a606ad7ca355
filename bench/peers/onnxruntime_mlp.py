#!/usr/bin/env python3
"""Sluice against ONNX Runtime on the same .onnx files (issue: ONNX import, peer benchmark).

Two models, written with onnx.helper into a temporary directory (fixed seeds):
  mlp  3 x (Gemm + Relu), width 256, batch 32 (input [32, 256])
  cnn  2 x (Conv 3x3 + Relu + MaxPool 2x2), then Gemm, on 1x28x28, batch 16
Each is timed per run (median of interleaved rounds) with Sluice's
sluice.onnx.InferenceSession (default options, cpu) and onnxruntime's CPU provider with
--threads intra-op threads; Sluice's import time (ImportOnnxModel through
sluice.onnx.import_model) is timed too. Peers are for comparison only: onnxruntime and onnx
are never dependencies of Sluice, and a missing one is reported and skipped. A model Sluice
cannot import is reported with the importer's error.

Usage: python3 bench/peers/onnxruntime_mlp.py [--rounds R] [--runs N] [--threads T]
"""
import argparse
import os
import statistics
import tempfile
import time


def make_mlp(path, rng, np, onnx):
    from onnx import TensorProto, helper, numpy_helper
    width, batch = 256, 32
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((width, width)) / 16).astype(np.float32)
        b = (rng.standard_normal(width) / 10).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"], name=f"fc{i}"),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return {"x": rng.standard_normal((batch, width)).astype(np.float32)}


def make_cnn(path, rng, np, onnx):
    from onnx import TensorProto, helper, numpy_helper
    batch = 16
    nodes, inits, prev, channels = [], [], "x", 1
    for i, out in enumerate((8, 16)):
        w = (rng.standard_normal((out, channels, 3, 3)) / 3).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"cw{i}"),
                  numpy_helper.from_array(np.zeros(out, np.float32), f"cb{i}")]
        nodes += [helper.make_node("Conv", [prev, f"cw{i}", f"cb{i}"], [f"c{i}"], pads=[1, 1, 1, 1],
                                   name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
                  helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], kernel_shape=[2, 2],
                                   strides=[2, 2], name=f"pool{i}")]
        prev, channels = f"p{i}", out
    inits += [numpy_helper.from_array(np.array([batch, 16 * 7 * 7], np.int64), "flat"),
              numpy_helper.from_array((rng.standard_normal((16 * 7 * 7, 10)) / 28).astype(
                  np.float32), "fw"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fb")]
    nodes += [helper.make_node("Reshape", [prev, "flat"], ["f"], name="flatten"),
              helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc")]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return {"x": rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)}


def per_run_us(run, runs):
    start = time.perf_counter()
    for _ in range(runs):
        run()
    return (time.perf_counter() - start) / runs * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    parser.add_argument("--runs", type=int, default=300, help="runs per round and engine")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    args = parser.parse_args()
    try:
        import numpy as np
        import onnx
    except ImportError as e:
        print(f"needs numpy and onnx to write the models: {e}")
        return
    import sluice
    import sluice.onnx
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        print("onnxruntime: not installed; Sluice alone")
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("mlp", make_mlp), ("cnn", make_cnn)):
            path = os.path.join(tmp, f"{name}.onnx")
            feeds = make(path, rng, np, onnx)
            data = open(path, "rb").read()
            try:
                imports = []
                for _ in range(5):
                    start = time.perf_counter()
                    sluice.onnx.import_model(data)
                    imports.append((time.perf_counter() - start) * 1e3)
                session = sluice.onnx.InferenceSession(path)
            except sluice.errors.Error as e:  # noqa: PERF203
                print(f"{name}: Sluice cannot import it: {e}")
                continue
            engines = {"sluice": lambda s=session: s.run(None, feeds)}
            if ort is not None:
                options = ort.SessionOptions()
                options.intra_op_num_threads = args.threads
                options.inter_op_num_threads = 1
                peer = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                engines["onnxruntime"] = lambda s=peer: s.run(None, feeds)
                ours = session.run(None, feeds)[0]
                theirs = peer.run(None, feeds)[0]
                print(f"{name}: max |sluice - onnxruntime| = {np.abs(ours - theirs).max():.3g}")
            for run in engines.values():
                for _ in range(20):
                    run()  # warm up
            times = {e: [] for e in engines}
            for _ in range(args.rounds):
                for engine, run in engines.items():
                    times[engine].append(per_run_us(run, args.runs))
            med = {e: statistics.median(t) for e, t in times.items()}
            line = f"{name}: sluice {med['sluice']:.1f} us per run"
            if "onnxruntime" in med:
                line += (f", onnxruntime {ort.__version__} ({args.threads} threads) "
                         f"{med['onnxruntime']:.1f} us: {med['sluice'] / med['onnxruntime']:.2f}x")
            line += f"; Sluice import {statistics.median(imports):.2f} ms"
            print(line)


if __name__ == "__main__":
    main()
