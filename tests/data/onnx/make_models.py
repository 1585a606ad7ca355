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


if __name__ == "__main__":
    add_relu()
