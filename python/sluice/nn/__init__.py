"""Layers, losses and graphs. Layers work in both modes: in static mode (inside a
program_guard or after sluice.enable_static()) they build programs; otherwise they run
eagerly on Tensors, with parameters that require gradients."""

from .. import _sluice
from .._context import current_context
from .graph import Graph
from . import functional


def _static():
    return _sluice._in_program_guard()


class Layer:
    """A module with parameters; ``__call__`` runs ``forward``."""

    def parameters(self):
        return []

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class Linear(Layer):
    """y = x @ weight + bias; weight [in_features, out_features] Glorot-uniform, bias 0.

    Static mode: the parameters are persistable variables of the main program, initialized
    by the startup program (``weight.name``, ``bias.name`` name them in the scope). Eager:
    Tensors that require gradients."""

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, name=None,
                 seed=None, dtype="float32", context=None):
        self.in_features = in_features
        self.out_features = out_features
        if _static():
            self._static = _sluice._StaticLinear(in_features, out_features, seed, dtype,
                                                 name or "linear")
            self.weight = self._static.weight
            self.bias = self._static.bias
        else:
            self._static = None
            ctx = context if context is not None else current_context()
            bound = (6.0 / (in_features + out_features)) ** 0.5
            from .. import rand, zeros

            self.weight = rand([in_features, out_features], -bound, bound, seed=seed,
                               dtype=dtype, context=ctx)
            self.bias = zeros([out_features], dtype=dtype, context=ctx)
            self.weight.requires_grad = True
            self.bias.requires_grad = True

    def parameters(self):
        return [self.weight, self.bias]

    def forward(self, x):
        if self._static is not None and isinstance(x, _sluice.Variable) and _static():
            return self._static(x)
        return _sluice.matmul(x, self.weight) + self.bias


class MSELoss(Layer):
    """mean((input - label)^2)."""

    def __init__(self, reduction="mean"):
        if reduction != "mean":
            raise ValueError("MSELoss: only reduction='mean' is supported")

    def forward(self, input, label):
        return _sluice.mse_loss(input, label)


class ReLU(Layer):
    def forward(self, x):
        return _sluice.relu(x)


class Sequential(Layer):
    def __init__(self, *layers):
        self.layers = list(layers)

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


__all__ = ["Layer", "Linear", "MSELoss", "ReLU", "Sequential", "Graph", "functional"]
