"""What an ONNX model declares about its graph inputs and outputs, read from the serialized
ModelProto without the ``onnx`` package: each value's name, element type and dimensions
(ints, dim_param names, or None), the initializer names, the IR version and the opsets.

Only the few fields this needs are decoded (protobuf's wire format: varints and
length-delimited fields); everything else, the tensors' data included, is skipped over.
Field numbers are onnx.proto's.
"""

# TensorProto.DataType values -> the type names ONNX Runtime reports ("tensor(float)").
ELEM_TYPE_NAMES = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn",
    18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
    23: "float4e2m1",
}


class ValueInfo:
    """A graph input or output as the model declares it. ``kind`` is "tensor", "sequence",
    "map", "optional", "sparse_tensor" or "unknown"; ``dims`` is None when the model gives no
    shape, else one entry per dimension: an int, the dim_param name, or None."""

    __slots__ = ("name", "kind", "elem_type", "dims")

    def __init__(self, name, kind, elem_type, dims):
        self.name = name
        self.kind = kind
        self.elem_type = elem_type
        self.dims = dims

    @property
    def type_name(self):
        """The type as ONNX Runtime names it: "tensor(float)", "seq(...)", ..."""
        if self.kind == "tensor":
            return f"tensor({ELEM_TYPE_NAMES.get(self.elem_type, 'undefined')})"
        return self.kind


class ModelInfo:
    __slots__ = ("ir_version", "opsets", "inputs", "outputs", "initializers")

    def __init__(self):
        self.ir_version = 0
        self.opsets = {}  # domain ("" for the default) -> version
        self.inputs = []  # ValueInfo, every graph input (initializers listed as inputs too)
        self.outputs = []
        self.initializers = set()

    @property
    def feeds(self):
        """The graph inputs that are not initializers: what a run must feed."""
        return [v for v in self.inputs if v.name not in self.initializers]


def _varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf):
    """(field number, wire type, value) for each field of a message: an int for varints and
    fixed-size fields, a memoryview for length-delimited ones."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("truncated field")
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def _string(view):
    return bytes(view).decode("utf-8", errors="replace")


def _dims(shape):
    dims = []
    for number, _, dim in _fields(shape):
        if number != 1:
            continue
        value = None
        for n, _, v in _fields(dim):
            if n == 1:
                value = _signed(v)
            elif n == 2:
                value = _string(v)
        dims.append(value)
    return dims


_KINDS = {1: "tensor", 4: "sequence", 5: "map", 8: "sparse_tensor", 9: "optional"}


def _value_info(buf):
    name, kind, elem_type, dims = "", "unknown", 0, None
    for number, _, value in _fields(buf):
        if number == 1:
            name = _string(value)
        elif number == 2:
            for n, _, v in _fields(value):
                if n not in _KINDS:
                    continue
                kind = _KINDS[n]
                if n in (1, 8):  # TypeProto.Tensor / SparseTensor: elem_type, shape
                    for tn, _, tv in _fields(v):
                        if tn == 1:
                            elem_type = tv
                        elif tn == 2:
                            dims = _dims(tv)
    return ValueInfo(name, kind, elem_type, dims)


def _tensor_name(buf):
    for number, _, value in _fields(buf):
        if number == 8:
            return _string(value)
    return ""


def read_model_info(data):
    """The ModelInfo of serialized ModelProto bytes. ValueError for bytes that are not a
    protobuf message."""
    buf = memoryview(data)
    info = ModelInfo()
    for number, _, value in _fields(buf):
        if number == 1:
            info.ir_version = value
        elif number == 8:
            domain, version = "", 0
            for n, _, v in _fields(value):
                if n == 1:
                    domain = _string(v)
                elif n == 2:
                    version = v
            info.opsets["" if domain == "ai.onnx" else domain] = version
        elif number == 7:
            for n, _, v in _fields(value):
                if n == 11:
                    info.inputs.append(_value_info(v))
                elif n == 12:
                    info.outputs.append(_value_info(v))
                elif n == 5:
                    info.initializers.add(_tensor_name(v))
    return info
