"""Exceptions raised by Sluice: one class per absl status code.

Every error from the engine is a :class:`Error` carrying ``code`` (the status code's name,
such as ``"INVALID_ARGUMENT"``) and ``message`` (which names the culprit: the op, the
operand, the variable, the file). Each class also derives from the built-in exception a
Python caller would catch for it: ``InvalidArgumentError`` is a ``ValueError``,
``NotFoundError`` a ``LookupError``, ``UnimplementedError`` a ``NotImplementedError``.
"""

from . import _sluice


class Error(RuntimeError):
    """An error status from the engine."""

    code: str = "UNKNOWN"
    message: str = ""


class CancelledError(Error):
    code = "CANCELLED"


class UnknownError(Error):
    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    code = "INVALID_ARGUMENT"


class DeadlineExceededError(Error, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class NotFoundError(Error, LookupError):
    code = "NOT_FOUND"


class AlreadyExistsError(Error, ValueError):
    code = "ALREADY_EXISTS"


class PermissionDeniedError(Error, PermissionError):
    code = "PERMISSION_DENIED"


class ResourceExhaustedError(Error, MemoryError):
    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(Error):
    code = "FAILED_PRECONDITION"


class AbortedError(Error):
    code = "ABORTED"


class OutOfRangeError(Error, IndexError):
    code = "OUT_OF_RANGE"


class UnimplementedError(Error, NotImplementedError):
    code = "UNIMPLEMENTED"


class InternalError(Error):
    code = "INTERNAL"


class UnavailableError(Error):
    code = "UNAVAILABLE"


class DataLossError(Error):
    code = "DATA_LOSS"


class UnauthenticatedError(Error):
    code = "UNAUTHENTICATED"


# absl::StatusCode values.
_BY_CODE = {
    1: CancelledError,
    2: UnknownError,
    3: InvalidArgumentError,
    4: DeadlineExceededError,
    5: NotFoundError,
    6: AlreadyExistsError,
    7: PermissionDeniedError,
    8: ResourceExhaustedError,
    9: FailedPreconditionError,
    10: AbortedError,
    11: OutOfRangeError,
    12: UnimplementedError,
    13: InternalError,
    14: UnavailableError,
    15: DataLossError,
    16: UnauthenticatedError,
}
_sluice._set_error_classes(_BY_CODE)

__all__ = ["Error"] + [cls.__name__ for cls in _BY_CODE.values()]
