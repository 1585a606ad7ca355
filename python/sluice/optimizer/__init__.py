"""Optimizers. ``minimize(loss)`` in static mode (or inside a Graph's build) appends
backward and the update ops to the loss's program; in eager mode ``step()`` (or
``minimize(loss)`` after ``loss.backward()``, as in Paddle) updates the ``parameters`` in
place from their ``.grad`` and ``clear_grad()`` zeroes them."""

from .. import _sluice


class _Optimizer:
    def __init__(self, learning_rate, parameters):
        self.learning_rate = float(learning_rate)
        self._parameters = list(parameters) if parameters is not None else None
        self._eager = None

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        if isinstance(loss, _sluice.Tensor):
            # Paddle's dygraph pattern: loss.backward(), then minimize(loss) steps.
            self.step()
            return None
        names = [v if isinstance(v, str) else v.name for v in (no_grad_set or [])]
        return self._static().minimize(loss, names)

    def _require_parameters(self):
        if not self._parameters:
            raise ValueError(f"{type(self).__name__}: eager step() needs parameters=[...]")
        return self._parameters

    def step(self):
        if self._eager is None:
            self._eager = self._make_eager(self._require_parameters())
        self._eager.step()

    def clear_grad(self):
        for p in self._require_parameters():
            p.clear_grad()

    zero_grad = clear_grad


class SGD(_Optimizer):
    """param -= learning_rate * grad."""

    def __init__(self, learning_rate=0.001, parameters=None):
        super().__init__(learning_rate, parameters)

    def _static(self):
        return _sluice._StaticSgd(self.learning_rate)

    def _make_eager(self, params):
        return _sluice._EagerSgd(params, self.learning_rate)


class Adam(_Optimizer):
    """Adam with bias correction; the default learning rate 0.001 is Paddle's."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameters=None):
        super().__init__(learning_rate, parameters)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def _static(self):
        return _sluice._StaticAdam(self.learning_rate, self.beta1, self.beta2, self.epsilon)

    def _make_eager(self, params):
        return _sluice._EagerAdam(params, self.learning_rate, self.beta1, self.beta2,
                                  self.epsilon)


__all__ = ["SGD", "Adam"]
