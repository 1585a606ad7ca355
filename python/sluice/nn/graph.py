"""Graphs called from eager code, in the shape of ``oneflow.nn.Graph``."""

import weakref

from .. import _sluice
from .._context import current_context


class Graph:
    """Subclass and define ``build(self, *inputs)``; calling the graph on Tensors traces
    ``build`` once per input signature (dtypes, shapes, device) into a program, then runs
    each call as one VM instruction that returns at once::

        class TrainStep(sluice.nn.Graph):
            def __init__(self, model):
                super().__init__()
                self.model = model
            def build(self, x, y):
                loss = sluice.nn.MSELoss()(self.model(x), y)
                sluice.optimizer.Adam(learning_rate=0.01).minimize(loss)
                return loss

    Inside ``build`` the inputs are static Variables; eager Tensors it uses (a layer's
    weights) are bound to the program in place, so an optimizer's ``minimize`` inside it
    updates them. Calls are not recorded for autograd.
    """

    def __init__(self, name=None, device=None, context=None):
        self._name = name or type(self).__name__
        self._device = device
        self._context = context
        self._graph = None

    def build(self, *inputs):
        raise NotImplementedError("define build(self, *inputs) in the Graph subclass")

    def __call__(self, *inputs):
        if self._graph is None:
            # The inputs' context (a graph runs where its tensors live), else the current one.
            if self._context is not None:
                ctx = self._context
            elif inputs and isinstance(inputs[0], _sluice.Tensor):
                ctx = inputs[0].context
            else:
                ctx = current_context()
            # The engine's graph holds the function; a weak reference back to this object
            # keeps the pair collectable (a bound method would make a cycle through C++,
            # which Python's collector cannot see).
            this = weakref.ref(self)

            def build(*args):
                return this().build(*args)

            self._graph = _sluice._Graph(ctx, build, self._name, self._device)
        return self._graph(list(inputs))

    def reset_state(self):
        """Forgets the graph's optimizer state and traces; bound parameters keep values."""
        if self._graph is not None:
            self._graph.reset_state()

    def stats(self):
        return self._graph.stats() if self._graph is not None else {"calls": 0, "traces": 0}
