"""Sluice: an execution engine for tensor programs, built like a virtual machine.

Eager tensors run their ops asynchronously in the engine's VM::

    import numpy as np
    import sluice
    x = sluice.tensor(np.ones((2, 2), np.float32), device="sim:0")
    y = sluice.relu(x @ x + 1.0)      # returns at once
    print(np.asarray(y))               # waits for y only

Static programs, in the shape of ``paddle.static``, live in :mod:`sluice.static`; layers,
losses and graphs called from eager code in :mod:`sluice.nn`; optimizers in
:mod:`sluice.optimizer`; recording, replay and the stress run in :mod:`sluice.vm`; ONNX
models as static programs, and an ONNX Runtime-shaped session over them, in
:mod:`sluice.onnx`.
"""

import numpy as _np

from . import _sluice
from ._sluice import Tensor
from ._context import Context, current_context, default_context, init
from .errors import Error
from . import errors

# Functional ops: each takes Tensors (runs at once) or static Variables (appends to their
# program). The table's ops (docs/ops.md) come from _ops, generated with their bindings.
from ._ops import *  # noqa: F401,F403
from ._sluice import (  # noqa: F401
    softmax_with_cross_entropy, mse_loss, cond, while_loop,
)
from ._sluice import call as _call

__version__ = "0.1.0"

DTYPES = ("float32", "float64", "int32", "int64", "bool")

_static_mode = False


def tensor(data, dtype=None, device=None, requires_grad=False, context=None):
    """A tensor holding a copy of ``data`` (a NumPy array, anything ``numpy.asarray`` takes,
    or a Tensor), on ``device`` ("cpu", "sim:N", "cuda:N"; default: the context's default).

    Python floats become float32 unless ``dtype`` says otherwise, as in Paddle; NumPy
    arrays keep their dtype. Raises InvalidArgumentError for a dtype Sluice has not.
    """
    ctx = context if context is not None else current_context()
    if isinstance(data, Tensor):
        data = data.numpy()
    # asarray(order="C"), not ascontiguousarray: that one makes rank-0 arrays rank 1.
    if dtype is not None:
        array = _np.asarray(data, dtype=_np.dtype(dtype), order="C")
    elif isinstance(data, _np.ndarray):
        array = _np.asarray(data, order="C")
    else:
        array = _np.asarray(data)
        if array.dtype == _np.float64:
            array = array.astype(_np.float32)
    t = Tensor._from_array(ctx, array, device)
    if requires_grad:
        t.requires_grad = True
    return t


to_tensor = tensor


def _shape(shape):
    if isinstance(shape, int):
        return [shape]
    return [int(d) for d in shape]


def full(shape, fill_value, dtype="float32", device=None, context=None):
    """A tensor of ``shape`` filled with ``fill_value`` (a fill_constant op)."""
    if _sluice._in_program_guard() and context is None and device is None:
        return _sluice._fill(None, _shape(shape), float(fill_value), dtype)
    ctx = context if context is not None else current_context()
    return _sluice._fill(ctx, _shape(shape), float(fill_value), dtype, device)


def zeros(shape, dtype="float32", device=None, context=None):
    return full(shape, 0.0, dtype, device, context)


def ones(shape, dtype="float32", device=None, context=None):
    return full(shape, 1.0, dtype, device, context)


def rand(shape, min=0.0, max=1.0, seed=None, dtype="float32", device=None, context=None):
    """Uniform random values in [min, max); seeded ones are the same on every device."""
    ctx = context if context is not None else current_context()
    return _sluice._random(ctx, "uniform", _shape(shape), min, max, seed, dtype, device)


def randn(shape, mean=0.0, std=1.0, seed=None, dtype="float32", device=None, context=None):
    ctx = context if context is not None else current_context()
    return _sluice._random(ctx, "gaussian", _shape(shape), mean, std, seed, dtype, device)


def cast(x, dtype):
    """``x`` converted to ``dtype``."""
    return _call("cast", [x], {"dtype": str(_np.dtype(dtype)) if dtype != "bool" else "bool"})[0]


def call(op, *inputs, device=None, context=None, **attrs):
    """Runs any registered op by name: one positional argument per input slot (a Tensor or
    Variable, or a list for a variadic slot), attributes as keywords. Returns the op's
    outputs, a single one unwrapped."""
    out = _call(op, list(inputs), attrs, device, context)
    return out[0] if len(out) == 1 else tuple(out)


class no_grad:
    """``with sluice.no_grad():`` (or as a decorator): eager ops record nothing for
    autograd on this thread."""

    def __init__(self):
        self._guards = []  # one per entry: the same object may be entered nested

    def __enter__(self):
        guard = _sluice._NoGrad()
        guard.__enter__()
        self._guards.append(guard)
        return self

    def __exit__(self, *exc):
        self._guards.pop().__exit__(*exc)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        return wrapper


def stream(key):
    """``with sluice.stream("sim:0/compute:1"):`` eager ops on that device run on that
    stream (soft sync orders them with work on other streams)."""
    return _sluice._StreamScope(key)


def sync(context=None):
    """Waits for everything submitted so far; raises the first kernel error."""
    (context if context is not None else current_context()).sync()


def devices(context=None):
    """The devices of the context: "cpu", "sim:0", ..., "cuda:0", ..."""
    return (context if context is not None else current_context()).devices


# Places, as Paddle names them.
class Place:
    def __init__(self, device):
        self.device = device

    def __repr__(self):
        return f"{type(self).__name__}({self.device!r})"

    def __eq__(self, other):
        return isinstance(other, Place) and other.device == self.device

    def __hash__(self):
        return hash(self.device)


class CPUPlace(Place):
    def __init__(self):
        super().__init__("cpu")


class CUDAPlace(Place):
    def __init__(self, index=0):
        super().__init__(f"cuda:{int(index)}")


class SimPlace(Place):
    """An emulated accelerator (sim:N): streams with real asynchrony, on the host."""

    def __init__(self, index=0):
        super().__init__(f"sim:{int(index)}")


def _device_of(place):
    if place is None:
        return "cpu"
    if isinstance(place, Place):
        return place.device
    if isinstance(place, str):
        return place
    raise TypeError(f"expected a Place or a device string, got {type(place).__name__}")


def is_compiled_with_cuda():
    """Whether this build has the CUDA provider (``pip install .`` builds without it unless
    SLUICE_WITH_CUDA=ON is set)."""
    return bool(_sluice.compiled_with_cuda)


def enable_static():
    """Static mode: layers and ops build programs (the default programs of
    :mod:`sluice.static` unless a ``program_guard`` is active)."""
    global _static_mode
    if not _static_mode:
        from . import static as _st

        _st._enter_default_guard()
        _static_mode = True


def disable_static():
    global _static_mode
    if _static_mode:
        from . import static as _st

        _st._exit_default_guard()
        _static_mode = False


def in_dynamic_mode():
    return not _static_mode


from . import nn, onnx, optimizer, static, vm  # noqa: E402,F401
