"""ONNX's backend API (``onnx.backend.base``) over :class:`sluice.onnx.InferenceSession`:
what ONNX's backend test suite (``onnx.backend.test.BackendTest``) drives::

    import sluice.onnx.backend as backend
    rep = backend.prepare(model)             # an onnx.ModelProto; device "CPU"
    outputs = rep.run([x])                   # positional inputs, or a dict by name
    outputs = backend.run_model(model, [x])

``prepare`` runs ``onnx.checker.check_model`` from the ``onnx`` package first: the ONNX
library the importer links may be older than the model and then skips its own checker.
Needs the ``onnx`` package (imported when this module is); ``import sluice`` does not.
"""

import onnx
import onnx.checker
from onnx.backend.base import Backend, BackendRep, namedtupledict

from . import InferenceSession

__all__ = ["SluiceBackend", "SluiceRep", "prepare", "run_model", "run_node", "supports_device"]

_SESSION_OPTIONS = ("dim_sizes", "input_shapes", "context", "max_imports")


class SluiceRep(BackendRep):
    """A prepared model: an :class:`InferenceSession`. ``run`` takes the inputs to feed
    in the graph's order (a list or tuple; a single array for one input) or a dict by name,
    and returns the outputs as a namedtupledict in the graph's order."""

    def __init__(self, session):
        self.session = session

    def run(self, inputs, **kwargs):
        names = [arg.name for arg in self.session.get_inputs()]
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(names):
                raise ValueError(f"{len(inputs)} inputs given; the model takes {len(names)} "
                                 f"({', '.join(names)})")
            feed = dict(zip(names, inputs))
        outputs = self.session.run(None, feed)
        output_names = [arg.name for arg in self.session.get_outputs()]
        return namedtupledict("Outputs", output_names)(*outputs)


class SluiceBackend(Backend):
    """Sluice as an ONNX backend: models run on cpu through the importer and the static
    executor."""

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """A :class:`SluiceRep` for ``model`` (an ``onnx.ModelProto``, its bytes or a path),
        after ``onnx.checker.check_model``. The session's keyword options are taken
        (``dim_sizes``, ``input_shapes``, ``context``, ``max_imports``); others are ignored,
        as ONNX Runtime's backend ignores the options it does not have."""
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r} is not supported: sluice.onnx runs on CPU")
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load_model_from_string(model) if isinstance(
                model, (bytes, bytearray)) else onnx.load(model)
        super().prepare(model, device, **kwargs)  # onnx.checker.check_model
        options = {k: v for k, v in kwargs.items() if k in _SESSION_OPTIONS}
        return SluiceRep(InferenceSession(model, **options))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device):
        """Only "CPU"."""
        return str(device).upper().split(":")[0] == "CPU"


# Module-level functions, as ONNX's backend API modules (onnxruntime.backend) have them.
prepare = SluiceBackend.prepare
run_model = SluiceBackend.run_model
run_node = SluiceBackend.run_node
supports_device = SluiceBackend.supports_device
is_compatible = SluiceBackend.is_compatible
