"""Shared fixtures and helpers for the tests of the `sluice` Python package.

Run from the repository root with the package importable, e.g.::

    PYTHONPATH=<build>/python python -m pytest tests/python -q
"""

import os
import shutil

import numpy as np
import pytest

import sluice
from sluice import static


DTYPES = ("float32", "float64", "int32", "int64", "bool")
DEVICES = ("cpu", "sim:0")


def random_array(rng, shape, dtype):
    """Random values of `dtype`: normals for floats, small signed ints, random bools."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's name: fixed across runs, distinct per test."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture
def ctx():
    """A fresh context with two sim devices, current for the test (`with ctx:`)."""
    context = sluice.Context(sim_devices=2)
    with context:
        yield context
    context.sync()


@pytest.fixture
def checked_ctx():
    """A fresh context whose VM checks every access against happens-before."""
    context = sluice.Context(sim_devices=2, check_sync=True)
    with context:
        yield context
    context.sync()
    assert context.sync_violations() == 0


@pytest.fixture
def scope(ctx):
    """A scope of its own, in the test's context."""
    return static.Scope(ctx)


@pytest.fixture(autouse=True)
def _leave_dynamic_mode():
    """Tests that switch to static mode (the seed example does) leave it afterwards."""
    yield
    sluice.disable_static()


def cli_path():
    """The `sluice` command-line tool: $SLUICE_CLI, else `sluice` on PATH, else None."""
    path = os.environ.get("SLUICE_CLI")
    if path:
        return path
    return shutil.which("sluice")


@pytest.fixture
def sluice_cli():
    path = cli_path()
    if path is None or not os.access(path, os.X_OK):
        message = ("the sluice command-line tool was not found (set SLUICE_CLI or put "
                   "`sluice` on PATH)")
        if os.environ.get("SLUICE_REQUIRE_CLI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path
