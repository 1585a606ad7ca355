"""The current eager context: the process-wide default, or the innermost ``with ctx:``."""

import threading

from . import _sluice

Context = _sluice.Context

_default = None
_default_options = {}
_lock = threading.Lock()
_local = threading.local()


def init(**options):
    """Sets the options of the default context before its first use.

    Options are those of :class:`sluice.Context`: ``sim_devices`` (2), ``cuda`` (True),
    ``seed``, ``sim_seed``, ``sim_jitter_us``, ``record_path``, ``check_sync``,
    ``default_device`` ("cpu"), ``scheduling`` ("dedicated" or "caller"). Raises
    FailedPreconditionError once the default context exists.
    """
    global _default_options
    with _lock:
        if _default is not None:
            _sluice._raise_status(9, "sluice.init: the default context already exists; "
                                     "create a sluice.Context and use `with ctx:` instead")
        Context(**options)  # checks the options now (a bad device is an error here)
        _default_options = dict(options)


def default_context():
    """The process-wide context, created on first use (see :func:`init`)."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = Context(**_default_options)
    return _default


def current_context():
    """The innermost context entered with ``with ctx:`` on this thread, else the default."""
    stack = getattr(_local, "stack", None)
    if stack:
        return stack[-1]
    return default_context()


def _enter(self):
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append(self)
    return self


def _exit(self, *exc):
    _local.stack.pop()
    return False


# `with ctx:` makes ctx current for tensors made without an explicit context.
Context.__enter__ = _enter
Context.__exit__ = _exit
