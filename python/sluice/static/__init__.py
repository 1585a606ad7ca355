"""Static programs, in the shape of ``paddle.static``.

A :class:`Program` is built inside ``program_guard(main, startup)`` (or in the default
programs after :func:`sluice.enable_static`) from :func:`data`, layers, losses and
optimizers, then run many times by an :class:`Executor`, which lowers it once into a
reusable instruction graph::

    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data(name="x", shape=[16, 16])
        y = static.data(name="y", shape=[16, 1])
        loss = sluice.nn.MSELoss()(sluice.nn.Linear(16, 1)(x), y)
        sluice.optimizer.Adam(learning_rate=0.01).minimize(loss)
    exe = static.Executor(sluice.CPUPlace())
    exe.run(startup)
    (value,) = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
"""

import numpy as _np

from .. import _sluice
from .._context import current_context
from ..errors import NotFoundError

Program = _sluice.Program
Variable = _sluice.Variable
cond = _sluice.cond
while_loop = _sluice.while_loop


def data(name, shape, dtype="float32", lod_level=0):
    """A feed variable of the current main program. Every dimension must be known."""
    if lod_level:
        raise ValueError("sluice.static.data: lod_level is not supported")
    if any(d is None or int(d) < 0 for d in shape):
        raise ValueError(
            f"sluice.static.data('{name}'): shape {list(shape)} has an unknown dimension; "
            "Sluice programs are static (give every dimension)")
    return _sluice.data(name, [int(d) for d in shape], str(_np.dtype(dtype)) if dtype != "bool" else "bool")


_defaults = {}
_default_guard = []


def default_main_program():
    """The main program ops go to when no program_guard is active (static mode)."""
    if "main" not in _defaults:
        _defaults["main"] = Program()
    return _defaults["main"]


def default_startup_program():
    if "startup" not in _defaults:
        _defaults["startup"] = Program()
    return _defaults["startup"]


def _enter_default_guard():
    guard = _sluice._ProgramGuard(default_main_program(), default_startup_program())
    guard.__enter__()
    _default_guard.append(guard)


def _exit_default_guard():
    if _default_guard:
        _default_guard.pop().__exit__(None, None, None)


class program_guard:
    """``with program_guard(main, startup):`` layers, data and ops build ``main``;
    parameter initializers and optimizer state go to ``startup`` (the default startup
    program when None). Guards nest; each applies to the thread that entered it."""

    def __init__(self, main_program, startup_program=None):
        if startup_program is None:
            startup_program = default_startup_program()
        self._guard = _sluice._ProgramGuard(main_program, startup_program)

    def __enter__(self):
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        return False


class Scope:
    """Variables that live across runs: parameters and optimizer state."""

    def __init__(self, context=None):
        self._scope = _sluice.Scope(context if context is not None else current_context())

    def find_var(self, name):
        """The variable ``name``, or None when the scope does not hold it."""
        if not self._scope.has_var(name):
            return None
        return ScopeVariable(self, name)

    def var(self, name):
        """The variable ``name`` (one :meth:`ScopeVariable.get_tensor().set` creates)."""
        return ScopeVariable(self, name)

    def var_names(self):
        return self._scope.var_names()


class ScopeVariable:
    def __init__(self, scope, name):
        self._scope = scope
        self.name = name

    def get_tensor(self):
        return ScopeTensor(self._scope, self.name)

    def __repr__(self):
        return f"ScopeVariable({self.name!r})"


class ScopeTensor:
    """A scope variable's value: ``np.array(t)`` reads it, ``t.set(array, place)`` writes
    it (both ordered with the executor's runs)."""

    def __init__(self, scope, name):
        self._scope = scope
        self.name = name

    def set(self, array, place=None):
        from .. import _device_of

        self._scope._scope.write(self.name, _np.asarray(array, order="C"), _device_of(place))

    def shape(self):
        return list(self._scope._scope.var_shape(self.name))

    def numpy(self):
        return self._scope._scope.read(self.name)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"ScopeTensor({self.name!r}, {self.numpy()!r})"


_global_scope = []


def global_scope():
    """The scope executors use unless told otherwise (one per process)."""
    if not _global_scope:
        _global_scope.append(Scope())
    return _global_scope[0]


class BuildStrategy:
    """How an Executor prepares a program, with Paddle's names for the memory passes.

    ``enable_inplace`` (True): an op writes its output into an input that dies at it, where
    the op allows it (the interpreter's in-place pass). ``enable_addto`` (False, as in
    Paddle): a gradient that several ops contribute to is accumulated in one buffer, the
    later contributors adding into it, and its ``sum`` op goes (the add-to pass). The results
    are the same bits either way."""

    def __init__(self):
        self.enable_inplace = True
        self.enable_addto = False


class Executor:
    """Runs programs on a place (``CPUPlace()``, ``CUDAPlace(i)``, ``SimPlace(i)``, or a
    device string). Keyword options: ``compute_streams`` (1), ``compile_subgraphs``
    (True), ``release_temporaries`` (True: the GC plan), ``build_strategy`` (a
    :class:`BuildStrategy`; default: its defaults). Runs of one program with the same feed
    and fetch names reuse its lowered instruction graph."""

    def __init__(self, place=None, context=None, compute_streams=1, compile_subgraphs=True,
                 release_temporaries=True, build_strategy=None):
        from .. import _device_of

        strategy = build_strategy if build_strategy is not None else BuildStrategy()
        if not isinstance(strategy, BuildStrategy):
            raise TypeError(f"build_strategy must be a sluice.static.BuildStrategy, got "
                            f"{type(strategy).__name__}")
        self.place = place
        self._context = context if context is not None else current_context()
        self._exe = _sluice.Executor(self._context, _device_of(place),
                                     compute_streams=compute_streams,
                                     compile_subgraphs=compile_subgraphs,
                                     release_temporaries=release_temporaries,
                                     inplace=bool(strategy.enable_inplace),
                                     addto=bool(strategy.enable_addto))

    def run(self, program=None, feed=None, fetch_list=None, scope=None, return_numpy=True,
            fetch_on_device=None, trace_path=""):
        """Runs ``program`` (default: the default main program) once.

        ``feed`` maps variable names to arrays, or to Tensors for device-resident feeds.
        ``fetch_list`` holds Variables or names; each fetch comes back as a NumPy array
        (a Tensor when ``return_numpy`` is False or its name is in ``fetch_on_device``,
        which keeps it on the device). The GIL is released while the program runs;
        Ctrl-C cancels it and raises KeyboardInterrupt, leaving the scope usable.
        """
        if program is None:
            program = default_main_program()
        if scope is None:
            scope = global_scope()
        names = [f if isinstance(f, str) else f.name for f in (fetch_list or [])]
        on_device = [f if isinstance(f, str) else f.name for f in (fetch_on_device or [])]
        return self._exe.run(program, dict(feed or {}), names, scope._scope,
                             return_numpy, on_device, trace_path)

    @property
    def device(self):
        return self._exe.device

    def close(self):
        self._exe = None


def save_persistables(executor, dirname, main_program=None, scope=None):
    """Writes every persistable variable of ``main_program`` to ``dirname/NAME.npy``
    (what ``sluice run --load`` reads).

    The whole set is replaced at once: the files are written into a sibling directory
    that is then swapped with ``dirname``, so a reader or a killed process sees the old
    set or the new one, never a mix. Other files in ``dirname`` are kept. Needs write
    access to the parent of ``dirname``; ``dirname`` cannot be a mount point."""
    _sluice._save_persistables(executor._exe, main_program or default_main_program(),
                               (scope or global_scope())._scope, dirname)


def load_persistables(executor, dirname, main_program=None, scope=None, allow_missing=False):
    """Reads ``dirname/NAME.npy`` into every persistable variable of ``main_program``.

    Every file must be there unless ``allow_missing`` is True: the error names all the
    missing ones. With ``allow_missing``, the files present are loaded and every other
    persistable keeps its value (as the startup program made it). Returns the names of
    the variables left as they were (empty without ``allow_missing``). On error nothing
    is loaded."""
    return _sluice._load_persistables(executor._exe, main_program or default_main_program(),
                                      (scope or global_scope())._scope, dirname, allow_missing)


def load_program(path, context=None):
    """A program read from a file in the text format (docs/program-format.md)."""
    return _sluice._load_program(context if context is not None else current_context(), path)


__all__ = [
    "Program", "Variable", "program_guard", "data", "Executor", "Scope", "global_scope",
    "default_main_program", "default_startup_program", "cond", "while_loop", "BuildStrategy",
    "save_persistables", "load_persistables", "load_program", "NotFoundError",
]
