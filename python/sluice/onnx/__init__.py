"""ONNX models on Sluice: the C++ importer (framework/onnx, docs/onnx.md) from Python.

An ONNX model becomes a static :class:`sluice.static.Program` — its nodes as ops, its
initializers as persistable variables, its inputs as feeds and its outputs as fetches.
Three ways in, from the most convenient:

:class:`InferenceSession`, shaped like ``onnxruntime.InferenceSession``::

    sess = sluice.onnx.InferenceSession("model.onnx")
    (y,) = sess.run(None, {"x": x})          # None: every output
    [i.name for i in sess.get_inputs()]

:func:`load`, shaped like ``paddle.static.load_inference_model``: the program and its feed
and fetch names, with the persistables written into a scope::

    program, feed_names, fetch_names = sluice.onnx.load("model.onnx", dim_sizes={"batch": 8})
    exe = sluice.static.Executor(sluice.CPUPlace())
    (y,) = exe.run(program, feed={feed_names[0]: x}, fetch_list=fetch_names)

:func:`import_model`: the import itself (:class:`OnnxModel`: the program, the persistables
as NumPy arrays, the input and output maps, the importer's notes), touching no scope.

Sluice programs are static: every input's shape must be known when the model is imported.
A symbolic dimension (``batch``) takes its size from ``dim_sizes``, or a whole input shape
from ``input_shapes``; an :class:`InferenceSession` takes them from the arrays it is fed,
importing the model once per distinct set of input shapes. ``model`` arguments are a path,
the serialized bytes, or an ``onnx.ModelProto``. Import errors are :mod:`sluice.errors`
classes naming the node (``UnimplementedError`` for an op type the importer lacks,
``InvalidArgumentError`` for an unsupported attribute, dtype or opset).

The ``onnx`` package is not needed here; :mod:`sluice.onnx.backend` (ONNX's backend API,
for ONNX's backend test suite) uses it.
"""

import collections
import os
import threading

import numpy as _np

from .. import _sluice
from .._context import current_context
from ..errors import InvalidArgumentError
from ._model_info import read_model_info

__all__ = [
    "InferenceSession", "NodeArg", "OnnxModel", "OpSupport", "import_model", "is_available",
    "load", "supported_ops",
]

# The package's dtype names (DataTypeName) as NumPy dtypes.
_NUMPY_DTYPES = {
    "f32": _np.dtype(_np.float32), "f64": _np.dtype(_np.float64), "i32": _np.dtype(_np.int32),
    "i64": _np.dtype(_np.int64), "bool": _np.dtype(_np.bool_),
}
# ONNX element types (TensorProto.DataType) Sluice has, as NumPy dtypes.
_ONNX_NUMPY_DTYPES = {
    1: _np.dtype(_np.float32), 11: _np.dtype(_np.float64), 6: _np.dtype(_np.int32),
    7: _np.dtype(_np.int64), 9: _np.dtype(_np.bool_),
}


OpSupport = collections.namedtuple("OpSupport", "op_type first_opset last_opset limits")
OpSupport.__doc__ = ("One row of the importer's op table: an op type of the default ONNX "
                     "domain, the opsets it is mapped at, and what the mapping refuses.")


def supported_ops():
    """The importer's op table (docs/onnx.md), ordered by op type: :class:`OpSupport` rows.
    An op type mapped differently across opsets has a row per range. Empty in a build
    without ONNX."""
    return [OpSupport(*row) for row in _sluice._onnx_supported_ops()]


def is_available():
    """Whether this build can import ONNX models (it links ONNX: Debian's libonnx-dev and
    libprotobuf-dev when it was built)."""
    return bool(_sluice._onnx_import_available())


def _error(cls, message):
    error = cls(message)
    error.message = message
    return error


def _model_bytes(model):
    """The serialized ModelProto: `model` is a path, bytes-like, or has SerializeToString
    (an onnx.ModelProto)."""
    if isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            return f.read()
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    raise TypeError("expected a path, the model's bytes or an onnx.ModelProto, got "
                    f"{type(model).__name__}")


def _shape_dict(input_shapes):
    return {str(k): [int(d) for d in v] for k, v in (input_shapes or {}).items()}


class OnnxModel:
    """One import of an ONNX model.

    ``program``: the :class:`sluice.static.Program`. ``params``: the persistable variables'
    values (the initializers and the constants the program reads as tensors), a dict from
    variable name to NumPy array in declaration order; write them into the scope the program
    runs in (:meth:`write_params`). ``inputs`` / ``outputs``: the feeds and fetches, each
    with ``onnx_name``, ``var`` (the program's variable; ONNX names are kept unless the
    program format cannot hold them), ``dtype`` and ``shape``. ``notes``: what the import
    did that a user may want to know. ``ir_version``, ``opset`` (of the default domain),
    ``producer``."""

    def __init__(self, imported):
        self.program = imported.program
        self.params = dict(imported.persistables)
        self.inputs = list(imported.inputs)
        self.outputs = list(imported.outputs)
        self.notes = list(imported.notes)
        self.ir_version = imported.ir_version
        self.opset = imported.opset
        self.producer = imported.producer

    @property
    def feed_names(self):
        """The program variables to feed, in the graph's input order."""
        return [v.var for v in self.inputs]

    @property
    def fetch_names(self):
        """The program variables to fetch, in the graph's output order."""
        return [v.var for v in self.outputs]

    def write_params(self, scope, place=None):
        """Writes every persistable into ``scope`` (a :class:`sluice.static.Scope`), on
        ``place`` (default: cpu)."""
        for name, value in self.params.items():
            scope.var(name).get_tensor().set(value, place)

    def __repr__(self):
        return (f"OnnxModel(ir_version={self.ir_version}, opset={self.opset}, "
                f"ops={len(self.program.op_types())}, params={len(self.params)}, "
                f"inputs={self.inputs}, outputs={self.outputs})")


def import_model(model, dim_sizes=None, input_shapes=None, context=None,
                 constant_inputs=None):
    """Imports ``model`` (a path, bytes, or an ``onnx.ModelProto``) as an :class:`OnnxModel`.

    ``dim_sizes`` gives symbolic dimensions their sizes by name (``{"batch": 8}``);
    ``input_shapes`` gives whole input shapes by ONNX input name (``{"x": [8, 3]}``; each
    dimension the model fixes must agree); ``constant_inputs`` takes graph inputs as
    constants with the given arrays (``{"shape": np.array([2, 6])}``): they are no longer
    fed, and ops that take them as attributes (Reshape's shape, a Reduce's axes, ...) fold
    them. The program belongs to ``context`` (default: the current one). Raises the
    :mod:`sluice.errors` class of the importer's status."""
    ctx = context if context is not None else current_context()
    sizes = {str(k): int(v) for k, v in (dim_sizes or {}).items()}
    constants = {str(k): _np.asarray(v, order="C") for k, v in (constant_inputs or {}).items()}
    return OnnxModel(_sluice._onnx_import(ctx, _model_bytes(model), sizes,
                                          _shape_dict(input_shapes), constants))


def load(model, dim_sizes=None, input_shapes=None, scope=None, place=None, context=None):
    """Imports ``model`` and writes its persistables into ``scope`` (default:
    :func:`sluice.static.global_scope`), on ``place`` (default: cpu), as
    ``paddle.static.load_inference_model`` does. Returns ``(program, feed_names,
    fetch_names)``: the :class:`sluice.static.Program` and the variable names to feed and
    fetch, in the graph's input and output order. ``dim_sizes`` and ``input_shapes`` are
    :func:`import_model`'s."""
    from .. import static

    imported = import_model(model, dim_sizes, input_shapes, context)
    imported.write_params(scope if scope is not None else static.global_scope(), place)
    return imported.program, imported.feed_names, imported.fetch_names


class NodeArg:
    """A model input or output as :class:`InferenceSession` describes it (onnxruntime's
    NodeArg): ``name``, ``shape`` (one entry per dimension: an int, the symbolic dimension's
    name, or None; None for no shape at all) and ``type`` (``"tensor(float)"``, ...)."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name, shape, type):  # noqa: A002 (onnxruntime's name)
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class _Variant:
    """The model imported for one set of input shapes, and the scope it runs in."""

    def __init__(self, model, scope):
        self.model = model
        self.scope = scope
        self.feeds = {v.onnx_name: v for v in model.inputs}
        self.fetches = {v.onnx_name: v.var for v in model.outputs}


class InferenceSession:
    """An ONNX model ready to run on cpu, shaped like ``onnxruntime.InferenceSession``.

    ``model``: a path, the model's bytes, or an ``onnx.ModelProto``. ``providers``: None or
    ``["CPUExecutionProvider"]`` (the only one). ``dim_sizes`` / ``input_shapes``: the sizes
    the first import uses, as in :func:`import_model`.

    The model is imported when the session is made if every input's shape is known then
    (the model's own, or given), else at the first :meth:`run`. A run whose arrays have
    other shapes than the imported program's imports the model again with those shapes
    (:func:`import_model`'s ``input_shapes``), once per distinct set of shapes (the last
    ``max_imports`` are kept); a dimension the model fixes cannot change. An input that an
    op takes as an attribute (a Reshape's shape fed at run time) is taken as a constant with
    the fed value (``constant_inputs``): the import that needs it says so, and the session
    imports again per distinct value of such inputs. The initializers
    are written once into the session's own scope, which every import whose persistables
    hold the same values shares. Runs go through a :class:`sluice.static.Executor` on cpu,
    one at a time."""

    def __init__(self, model, providers=None, *, dim_sizes=None, input_shapes=None,
                 context=None, max_imports=8):
        from .. import static

        for provider in providers or []:
            name = provider[0] if isinstance(provider, tuple) else provider
            if name != "CPUExecutionProvider":
                raise _error(InvalidArgumentError,
                             f"provider '{name}' is not available: sluice.onnx runs on cpu "
                             "(CPUExecutionProvider)")
        self._bytes = _model_bytes(model)
        try:
            self._info = read_model_info(self._bytes)
        except ValueError as e:
            raise _error(InvalidArgumentError, f"not an ONNX model: {e}") from None
        self._context = context if context is not None else current_context()
        self._dim_sizes = {str(k): int(v) for k, v in (dim_sizes or {}).items()}
        self._input_shapes = _shape_dict(input_shapes)
        self._max_imports = max(1, int(max_imports))
        self._inputs = [NodeArg(v.name, v.dims, v.type_name) for v in self._info.feeds]
        self._outputs = [NodeArg(v.name, v.dims, v.type_name) for v in self._info.outputs]
        self._executor = static.Executor("cpu", context=self._context)
        self._scope = static.Scope(self._context)
        self._written = set()  # the persistables in self._scope
        self._variants = collections.OrderedDict()  # (shapes, constants) -> _Variant, oldest first
        self._constant_names = set()  # inputs taken as constants (constant_inputs)
        self._lock = threading.Lock()
        shapes = self._declared_shapes()
        if shapes is not None:
            try:
                self._variant_for(shapes, first=True)
            except InvalidArgumentError as e:
                if self._constant_wanted(str(e)) is None:
                    raise  # else: imported at the first run, with the fed values

    def get_inputs(self):
        """The inputs to feed (graph inputs that are not initializers), as :class:`NodeArg`."""
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return ["CPUExecutionProvider"]

    @property
    def imports(self):
        """The :class:`OnnxModel` of each input-shape set imported so far, oldest first."""
        with self._lock:
            return [v.model for v in self._variants.values()]

    def _declared_shapes(self):
        """Each input's shape from the model and the session's options, or None when one
        is not known."""
        shapes = []
        for arg in self._inputs:
            if arg.name in self._input_shapes:
                shapes.append(tuple(self._input_shapes[arg.name]))
                continue
            if arg.shape is None:
                return None
            dims = []
            for d in arg.shape:
                if isinstance(d, str):
                    d = self._dim_sizes.get(d)
                if d is None or d < 0:
                    return None
                dims.append(d)
            shapes.append(tuple(dims))
        return tuple(shapes)

    def _variant_for(self, shapes, arrays=None, first=False):
        """The import for these input shapes (and these values of the inputs taken as
        constants), importing it when new."""
        key = (shapes, self._constant_key(arrays))
        variant = self._variants.get(key)
        if variant is not None:
            self._variants.move_to_end(key)
            return variant
        while True:
            constants = {}
            if arrays is not None:
                constants = {arg.name: a for arg, a in zip(self._inputs, arrays)
                             if arg.name in self._constant_names}
            try:
                if first:
                    model = import_model(self._bytes, self._dim_sizes, self._input_shapes,
                                         self._context)
                else:
                    given = {arg.name: list(s) for arg, s in zip(self._inputs, shapes)
                             if arg.name not in constants}
                    model = import_model(self._bytes, self._dim_sizes, given, self._context,
                                         constants)
                break
            except InvalidArgumentError as e:
                wanted = self._constant_wanted(str(e))
                if first or arrays is None or wanted is None:
                    raise
                self._constant_names.add(wanted)
                key = (shapes, self._constant_key(arrays))
        variant = _Variant(model, self._scope_for(model))
        self._variants[key] = variant
        while len(self._variants) > self._max_imports:
            self._variants.popitem(last=False)
        return variant

    def _constant_key(self, arrays):
        """The values of the inputs taken as constants, as a hashable key."""
        if arrays is None or not self._constant_names:
            return ()
        return tuple((arg.name, a.dtype.str, a.shape, a.tobytes())
                     for arg, a in zip(self._inputs, arrays) if arg.name in self._constant_names)

    def _constant_wanted(self, message):
        """The fed input an import error asks to take as a constant, or None."""
        marker = "can be fixed at import (constant_inputs)"
        if marker not in message:
            return None
        for arg in self._inputs:
            if f"graph input '{arg.name}' {marker}" in message and \
                    arg.name not in self._constant_names:
                return arg.name
        return None

    def _scope_for(self, model):
        """The session's scope when its persistables agree with `model`'s (writing those it
        lacks), else a new scope holding `model`'s."""
        from .. import static

        for name, value in model.params.items():
            if name in self._written:
                held = self._scope._scope.read(name)
                if held.dtype != value.dtype or not _np.array_equal(held, value):
                    scope = static.Scope(self._context)
                    model.write_params(scope)
                    return scope
        for name, value in model.params.items():
            if name not in self._written:
                self._scope.var(name).get_tensor().set(value)
                self._written.add(name)
        return self._scope

    def _check_feed(self, input_feed):
        if not isinstance(input_feed, dict):
            raise TypeError(f"input_feed must be a dict from input name to array, got "
                            f"{type(input_feed).__name__}")
        expected = [arg.name for arg in self._inputs]
        unknown = [name for name in input_feed if name not in expected]
        if unknown:
            raise _error(InvalidArgumentError,
                         f"unknown input name(s) {', '.join(repr(n) for n in unknown)}; the "
                         f"model's inputs are {', '.join(repr(n) for n in expected)}")
        missing = [name for name in expected if name not in input_feed]
        if missing:
            raise _error(InvalidArgumentError,
                         f"missing input(s) {', '.join(repr(n) for n in missing)}: feed every "
                         f"one of {', '.join(repr(n) for n in expected)}")
        arrays = []
        for arg, info in zip(self._inputs, self._info.feeds):
            array = _np.asarray(input_feed[arg.name])
            want = _ONNX_NUMPY_DTYPES.get(info.elem_type) if info.kind == "tensor" else None
            if want is not None and array.dtype != want:
                raise _error(InvalidArgumentError,
                             f"input '{arg.name}' is {arg.type}: got an array of dtype "
                             f"{array.dtype} (expected {want})")
            # asarray(order="C"), not ascontiguousarray: that one makes rank-0 arrays rank 1.
            arrays.append(_np.asarray(array, order="C"))
        return arrays

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model on ``input_feed`` (a dict from input name to array) and returns
        the outputs named in ``output_names`` (None: every output) as NumPy arrays, in that
        order. InvalidArgumentError naming them for unknown or missing inputs, unknown
        output names, or an array of the wrong dtype."""
        if run_options is not None:
            raise _error(InvalidArgumentError, "run_options is not supported")
        arrays = self._check_feed(input_feed)
        names = ([arg.name for arg in self._outputs] if output_names is None
                 else list(output_names))
        known = {arg.name for arg in self._outputs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise _error(InvalidArgumentError,
                         f"unknown output name(s) {', '.join(repr(n) for n in unknown)}; the "
                         f"model's outputs are "
                         f"{', '.join(repr(arg.name) for arg in self._outputs)}")
        shapes = tuple(tuple(int(d) for d in a.shape) for a in arrays)
        with self._lock:
            variant = self._variant_for(shapes, arrays)
            feed = {variant.feeds[arg.name].var: a for arg, a in zip(self._inputs, arrays)
                    if arg.name in variant.feeds}
            fetch = [variant.fetches[n] for n in names]
            return self._executor.run(variant.model.program, feed=feed, fetch_list=fetch,
                                      scope=variant.scope)
