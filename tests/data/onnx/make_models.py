"""Writes the small ONNX models the C API tests read (needs the `onnx` package).

python3 tests/data/onnx/make_models.py   # from the repository root
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def add_relu():
    # y/out = relu(x + b): an ONNX name with '/' (a variable "y_out" in the program).
    b = numpy_helper.from_array(np.array([-1.0, 0.5, 2.0], np.float32), "b")
    nodes = [
        helper.make_node("Add", ["x", "b"], ["sum"], name="add"),
        helper.make_node("Relu", ["sum"], ["y/out"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "add_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y/out", TensorProto.FLOAT, ["batch", 3])], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="make_models.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "add_relu.onnx"))




def control_flow():
    # if.onnx: y = relu(x) * 2 when sum(x) > 0, else x - 1 (the branches read x and a
    # constant from outside). loop.onnx: five times a = a * 0.5 + x + i, from a = 0.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["tr"]), helper.make_node("Mul", ["tr", "two"], ["t_out"])],
        "then", [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [2, 3])])
    one = helper.make_node("Constant", [], ["one"],
                           value=numpy_helper.from_array(np.array(1, np.float32)))
    other = helper.make_graph(
        [one, helper.make_node("Sub", ["x", "one"], ["e_out"])], "else", [],
        [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")]
    graph = helper.make_graph(
        nodes, "if", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"),
         numpy_helper.from_array(np.array(0, np.float32), "zero")])
    save(graph, "if.onnx")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"]),
         helper.make_node("Mul", ["a_in", "half"], ["m"]),
         helper.make_node("Add", ["m", "x"], ["a2"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["a2", "fi"], ["a_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cout", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a_out", TensorProto.FLOAT, [2, 3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "a0"], ["acc"], body=body, name="loop")], "loop", [x],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(5, np.int64), "M"),
         numpy_helper.from_array(np.zeros((2, 3), np.float32), "a0"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    save(graph, "loop.onnx")


def reshape_input():
    # reshape.onnx: y = reshape(x, shape) with the shape a graph input, which Sluice takes as
    # an attribute: loaded with the shape given as a constant input.
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    save(graph, "reshape.onnx")


def save(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="make_models.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


if __name__ == "__main__":
    add_relu()
    control_flow()
    reshape_input()
