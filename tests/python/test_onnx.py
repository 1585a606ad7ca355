"""sluice.onnx: ONNX models imported as static programs and run by an InferenceSession.

The models are made with onnx.helper (the onnx package is a test dependency: these tests skip
without it, except the one checking that `import sluice` does not need it); results are
compared with NumPy, and with onnxruntime only where it is installed.
"""

import subprocess
import sys

import numpy as np
import pytest

import sluice
import sluice.onnx
from sluice import errors, static

needs_import = pytest.mark.skipif(not sluice.onnx.is_available(),
                                  reason="this build of sluice has no ONNX import")


@pytest.fixture
def onnx():
    return pytest.importorskip("onnx")


def _model(onnx, nodes, inputs, outputs, initializers=(), opset=13):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="sluice-tests")
    model.ir_version = 8  # what the linked ONNX library (1.12) knows: its checker runs
    onnx.checker.check_model(model)
    return model


def _mlp_params(rng):
    return {
        "W1": rng.standard_normal((4, 8)).astype(np.float32),
        "b1": rng.standard_normal(8).astype(np.float32),
        "W2": rng.standard_normal((8, 3)).astype(np.float32),
        "b2": rng.standard_normal(3).astype(np.float32),
    }


def mlp_model(onnx, params, batch="N"):
    """x[batch, 4] -> MatMul, Add, Relu, Gemm -> Softmax -> probs[batch, 3]."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("Gemm", ["h2", "W2", "b2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    return _model(
        onnx, nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 3]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(v, k) for k, v in params.items()])


def mlp_reference(params, x):
    h = np.maximum(x @ params["W1"] + params["b1"], 0)
    logits = h @ params["W2"] + params["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), logits


def test_import_sluice_does_not_import_onnx():
    code = "import sys, sluice, sluice.onnx; assert 'onnx' not in sys.modules, 'onnx imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_supported_ops_table():
    rows = sluice.onnx.supported_ops()
    if not sluice.onnx.is_available():
        assert rows == []
        return
    by_type = {r.op_type: r for r in rows}
    assert {"MatMul", "Gemm", "Relu", "Softmax", "Add"} <= set(by_type)
    for row in rows:
        assert 1 <= row.first_opset <= row.last_opset
        assert isinstance(row.limits, str)
    assert [r.op_type for r in rows] == sorted(r.op_type for r in rows)


@needs_import
def test_session_matches_numpy(onnx, ctx, rng):
    params = _mlp_params(rng)
    sess = sluice.onnx.InferenceSession(mlp_model(onnx, params), dim_sizes={"N": 5})
    assert [(i.name, i.shape, i.type) for i in sess.get_inputs()] == [
        ("x", ["N", 4], "tensor(float)")]
    assert [o.name for o in sess.get_outputs()] == ["probs", "logits"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert len(sess.imports) == 1  # every shape known: imported when made
    x = rng.standard_normal((5, 4)).astype(np.float32)
    probs, logits = sess.run(None, {"x": x})
    want_probs, want_logits = mlp_reference(params, x)
    np.testing.assert_allclose(probs, want_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-5)
    (only,) = sess.run(["logits"], {"x": x})
    np.testing.assert_array_equal(only, logits)


@needs_import
def test_session_matches_onnxruntime(onnx, ctx, rng):
    ort = pytest.importorskip("onnxruntime")
    params = _mlp_params(rng)
    model = mlp_model(onnx, params).SerializeToString()
    x = rng.standard_normal((7, 4)).astype(np.float32)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = sluice.onnx.InferenceSession(model).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@needs_import
def test_session_reimports_for_new_input_shapes(onnx, ctx, rng):
    params = _mlp_params(rng)
    sess = sluice.onnx.InferenceSession(mlp_model(onnx, params))
    assert sess.imports == []  # the batch size is symbolic: imported at the first run
    for batch in (2, 6, 2, 1):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        probs, _ = sess.run(None, {"x": x})
        assert probs.shape == (batch, 3)
        np.testing.assert_allclose(probs, mlp_reference(params, x)[0], rtol=1e-5, atol=1e-6)
    assert [m.inputs[0].shape for m in sess.imports] == [(6, 4), (2, 4), (1, 4)]
    # The imports share the session's scope: the weights were written once.
    assert sorted(sess._scope.var_names()) == ["W1", "W2", "b1", "b2"]


@needs_import
def test_session_fixed_dimension_cannot_change(onnx, ctx, rng):
    sess = sluice.onnx.InferenceSession(mlp_model(onnx, _mlp_params(rng), batch=3))
    with pytest.raises(errors.InvalidArgumentError, match=r"'x'.*fixes 3"):
        sess.run(None, {"x": np.zeros((4, 4), np.float32)})


@needs_import
def test_session_feed_errors_name_the_inputs(onnx, ctx, rng):
    sess = sluice.onnx.InferenceSession(mlp_model(onnx, _mlp_params(rng)), dim_sizes={"N": 2})
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"missing input\(s\) 'x'"):
        sess.run(None, {})
    with pytest.raises(errors.InvalidArgumentError, match=r"unknown input name\(s\) 'y', 'z'"):
        sess.run(None, {"x": x, "y": x, "z": x})
    with pytest.raises(errors.InvalidArgumentError, match=r"unknown output name\(s\) 'nope'"):
        sess.run(["probs", "nope"], {"x": x})
    with pytest.raises(errors.InvalidArgumentError, match=r"'x' is tensor\(float\).*float64"):
        sess.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(TypeError, match="dict"):
        sess.run(None, [x])
    with pytest.raises(errors.InvalidArgumentError, match="CUDAExecutionProvider"):
        sluice.onnx.InferenceSession(mlp_model(onnx, _mlp_params(rng)),
                                     providers=["CUDAExecutionProvider"])
    # The session still runs after the errors.
    assert sess.run(None, {"x": x})[0].shape == (2, 3)


@needs_import
def test_unsupported_op_names_the_node(onnx, ctx):
    from onnx import TensorProto, helper

    model = _model(onnx, [helper.make_node("Det", ["x"], ["y"], name="the_det")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(errors.UnimplementedError, match=r"the_det.*Det") as info:
        sluice.onnx.import_model(model)
    assert info.value.code == "UNIMPLEMENTED"
    with pytest.raises(NotImplementedError, match="the_det"):
        sluice.onnx.InferenceSession(model)


@needs_import
def test_import_errors(onnx, ctx, rng, tmp_path):
    with pytest.raises(errors.DataLossError, match="not an ONNX model"):
        sluice.onnx.import_model(b"\x01\x02 not a model")
    with pytest.raises(errors.InvalidArgumentError, match="not an ONNX model"):
        sluice.onnx.InferenceSession(b"\xff\xff\xff")
    with pytest.raises(FileNotFoundError):
        sluice.onnx.import_model(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="path"):
        sluice.onnx.import_model(42)
    model = mlp_model(onnx, _mlp_params(rng))
    with pytest.raises(errors.InvalidArgumentError, match=r"'x' dimension 0 is symbolic \('N'\)"):
        sluice.onnx.import_model(model)


@needs_import
def test_import_model(onnx, ctx, rng, tmp_path):
    params = _mlp_params(rng)
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp_model(onnx, params).SerializeToString())
    imported = sluice.onnx.import_model(path, input_shapes={"x": [3, 4]})
    assert isinstance(imported.program, static.Program)
    ops = imported.program.op_types()
    assert ops[:3] == ["matmul", "add", "relu"] and ops[-1] == "softmax", ops
    assert list(imported.params) == ["W1", "b1", "W2", "b2"]
    for name, value in params.items():
        np.testing.assert_array_equal(imported.params[name], value)
    assert [(v.onnx_name, v.var, v.dtype, v.shape) for v in imported.inputs] == [
        ("x", "x", "f32", (3, 4))]
    assert [(v.onnx_name, v.shape) for v in imported.outputs] == [
        ("probs", (3, 3)), ("logits", (3, 3))]
    assert imported.feed_names == ["x"] and imported.fetch_names == ["probs", "logits"]
    assert imported.ir_version == 8 and imported.opset == 13
    assert imported.producer == "sluice-tests"
    assert any("checker" in note for note in imported.notes)


@needs_import
def test_load_runs_with_an_executor(onnx, ctx, scope, rng):
    params = _mlp_params(rng)
    program, feed_names, fetch_names = sluice.onnx.load(
        mlp_model(onnx, params), dim_sizes={"N": 4}, scope=scope)
    assert isinstance(program, static.Program)
    assert sorted(scope.var_names()) == ["W1", "W2", "b1", "b2"]
    x = rng.standard_normal((4, 4)).astype(np.float32)
    exe = static.Executor(sluice.CPUPlace())
    probs, logits = exe.run(program, feed={feed_names[0]: x}, fetch_list=fetch_names,
                            scope=scope)
    want_probs, want_logits = mlp_reference(params, x)
    np.testing.assert_allclose(probs, want_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-5)


@needs_import
def test_load_into_the_global_scope(onnx, rng):
    # In the default context, the global scope's (no `ctx`: the global scope is made once,
    # in the context current then, and the other tests' executors use it).
    params = _mlp_params(rng)
    program, feeds, fetches = sluice.onnx.load(mlp_model(onnx, params), dim_sizes={"N": 1})
    assert static.global_scope().find_var("W1") is not None
    x = rng.standard_normal((1, 4)).astype(np.float32)
    (probs,) = static.Executor().run(program, feed={"x": x}, fetch_list=fetches[:1])
    np.testing.assert_allclose(probs, mlp_reference(params, x)[0], rtol=1e-5, atol=1e-6)


@needs_import
def test_backend_api(onnx, ctx, rng):
    from sluice.onnx import backend

    params = _mlp_params(rng)
    model = mlp_model(onnx, params)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    x = rng.standard_normal((2, 4)).astype(np.float32)
    rep = backend.prepare(model, "CPU")
    out = rep.run([x])
    np.testing.assert_allclose(out.probs, mlp_reference(params, x)[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(rep.run({"x": x})[1], out.logits)
    np.testing.assert_array_equal(backend.run_model(model, x)[0], out[0])
    with pytest.raises(ValueError, match="CUDA"):
        backend.prepare(model, "CUDA")
    bad = mlp_model(onnx, params)
    bad.graph.node[0].input[1] = "undefined_weight"
    with pytest.raises(onnx.checker.ValidationError):
        backend.prepare(bad)


@needs_import
def test_onnx_names_map_to_program_variables(onnx, ctx):
    """Names the program format cannot hold become other variable names; the session takes
    and returns the ONNX names, and a graph output may be an initializer."""
    from onnx import TensorProto, helper, numpy_helper

    model = _model(
        onnx, [helper.make_node("Relu", ["in put/0"], ["out,1"])],
        [helper.make_tensor_value_info("in put/0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("out,1", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.array(7, np.float32), "c")])
    sess = sluice.onnx.InferenceSession(model)
    assert [i.name for i in sess.get_inputs()] == ["in put/0"]  # the initializer is no feed
    out, c = sess.run(None, {"in put/0": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out, [0.0, 2.0])
    assert c.shape == () and c == 7
    (imported,) = sess.imports
    assert imported.inputs[0].onnx_name == "in put/0"
    assert imported.inputs[0].var not in ("in put/0", "")
