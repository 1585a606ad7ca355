"""The package ships type information: py.typed and the extension's stub _sluice.pyi."""

import ast
import pathlib

import pytest

import sluice

PACKAGE_DIR = pathlib.Path(sluice.__file__).resolve().parent


def test_py_typed_marker():
    assert (PACKAGE_DIR / "py.typed").is_file()


@pytest.fixture
def stub():
    path = PACKAGE_DIR / "_sluice.pyi"
    if not path.is_file():
        pytest.skip(f"{PACKAGE_DIR} has no _sluice.pyi (a build tree without the stub target)")
    return path


def test_stub_parses_and_declares_the_extension(stub):
    tree = ast.parse(stub.read_text(), filename=str(stub))
    names = {node.name for node in tree.body
             if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    for name in ("Tensor", "Context", "Program", "Variable", "Executor", "Scope",
                 "relu", "matmul", "call", "cond", "while_loop"):
        assert name in names, name


def test_stub_names_exist_in_the_module(stub):
    tree = ast.parse(stub.read_text(), filename=str(stub))
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            assert hasattr(sluice._sluice, node.name), node.name


def test_stub_is_next_to_the_module(stub):
    assert list(PACKAGE_DIR.glob("_sluice*.so")) or list(PACKAGE_DIR.glob("_sluice*.pyd"))
