"""ONNX's backend test suite (onnx.backend.test.BackendTest) on sluice.onnx.backend.

Runs the suite's node tests (one ONNX op each, with its inputs and expected outputs, built in
memory from the generators in onnx/backend/test/case/node: the onnx wheel ships no
onnx/backend/test/data/node) and the model tests whose data the wheel ships (simple,
pytorch-converted, pytorch-operator), on CPU. Include-by-op-type: a test whose graph holds
an op type the importer does not map at the model's opset (sluice.onnx.supported_ops()) is
skipped naming the op; every other test runs and must pass unless a pattern of
onnx_backend_filters.jsonc excludes it, with its reason. The suite's CUDA variants are not
collected (the backend runs on CPU only).

`python tests/python/onnx_pass_table.py` prints the pass table by op type (docs/onnx.md).
Skips without the onnx package (pip install .[test] installs it).
"""

import collections
import json
import os
import re
import unittest
import warnings

import pytest

onnx = pytest.importorskip("onnx")

import onnx.backend.test  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402

import sluice.onnx  # noqa: E402

if not sluice.onnx.is_available():
    pytest.skip("this build of sluice has no ONNX import", allow_module_level=True)

from sluice.onnx import backend as sluice_backend  # noqa: E402

FILTERS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "onnx_backend_filters.jsonc")
# The kinds of tests whose models are at hand; "real" models are downloaded when they run.
KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")
DEVICE_SUFFIX = "_cpu"

# Runner's status of a test: it runs, or why not.
RUN, UNSUPPORTED, EXCLUDED = "run", "unsupported", "excluded"


def read_filters(path=FILTERS_PATH):
    """[(list name, pattern, reason)] from the JSON-with-comments filter file; the reason is
    the comment on the pattern's line ("" when there is none)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    code_lines, comments = [], []
    for line in text.splitlines():
        code, comment, i, in_string = line, "", 0, False
        while i < len(line):
            c = line[i]
            if in_string:
                if c == "\\":
                    i += 1
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif line.startswith("//", i):
                code, comment = line[:i], line[i + 2:].strip()
                break
            i += 1
        code_lines.append(code)
        comments.append(comment)
    lists = json.loads("\n".join(code_lines))
    reasons = {}
    for code, comment in zip(code_lines, comments):
        m = re.match(r'\s*("(?:[^"\\]|\\.)*")\s*,?\s*$', code)
        if m:
            reasons[json.loads(m.group(1))] = comment
    return [(name, pattern, reasons.get(pattern, ""))
            for name, patterns in lists.items() for pattern in patterns]


def graph_op_types(graph, out=None):
    """{(domain, op_type)} of a graph's nodes, subgraphs included ("" for the default
    domain)."""
    out = set() if out is None else out
    for node in graph.node:
        out.add(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                graph_op_types(attr.g, out)
            for g in attr.graphs:
                graph_op_types(g, out)
    return out


class CaseInfo:
    """What the classification needs of one test: its kind, op types, opset, and (node tests)
    the op type it tests."""

    def __init__(self, name, kind, model):
        self.name = name
        self.kind = kind
        self.ops = None if model is None else graph_op_types(model.graph)
        self.opset = None
        if model is not None:
            for o in model.opset_import:
                if o.domain in ("", "ai.onnx"):
                    self.opset = o.version
        self.op_type = None
        # Whether every graph input and output is a float32 tensor (the issue's "float32
        # node tests").
        self.float32 = model is not None and all(
            v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == 1
            for v in list(model.graph.input) + list(model.graph.output))


def _tested_op(info, by_name):
    """The op type a node test is about: the op of the test an `_expanded` test expands,
    else the graph's op type whose name best matches the test's name."""
    base = re.sub(r"_expanded(_ver\d+)?$", "", info.name)
    if base != info.name and base in by_name and by_name[base].ops:
        return _tested_op(by_name[base], by_name)
    types = sorted({t for _, t in info.ops})
    if not types:
        return None
    key = info.name[len("test_"):].replace("_", "").lower()

    def prefix(t):
        t = t.lower()
        n = 0
        while n < min(len(t), len(key)) and t[n] == key[n]:
            n += 1
        return n

    return max(types, key=lambda t: (prefix(t), -types.index(t)))


def load_cases():
    """{test name (without device suffix): CaseInfo} for every test of KINDS."""
    cases = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' NumPy overflow warnings
        for kind in KINDS:
            for case in load_model_tests(kind=kind):
                model = case.model
                if model is None and case.model_dir is not None:
                    model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
                cases[case.name] = CaseInfo(case.name, kind, model)
    for info in cases.values():
        if info.kind == "node" and info.ops:
            info.op_type = _tested_op(info, cases)
    return cases


def op_table():
    """{op_type: [(first_opset, last_opset)]} of the importer."""
    table = collections.defaultdict(list)
    for row in sluice.onnx.supported_ops():
        table[row.op_type].append((row.first_opset, row.last_opset))
    return table


def unsupported_reason(info, table):
    """Why the importer cannot import the test's model whatever its inputs, or None."""
    if info is None or info.ops is None:
        return None
    domains = sorted({d for d, _ in info.ops if d})
    if domains:
        return f"op domain(s) not imported: {', '.join(domains)}"
    missing = sorted({t for _, t in info.ops if t not in table})
    if missing:
        return f"op type(s) the importer does not map: {', '.join(missing)}"
    opset = info.opset or 0
    off = sorted(t for _, t in info.ops if not any(a <= opset <= b for a, b in table[t]))
    if off:
        ranges = "; ".join(f"{t} at {', '.join(f'{a}-{b}' for a, b in table[t])}" for t in off)
        return f"opset {opset}: the importer maps {ranges} only"
    return None


class Classification:
    """Each collected test's status (RUN, UNSUPPORTED or EXCLUDED) and reason."""

    def __init__(self):
        self.cases = load_cases()
        self.table = op_table()
        self.filters = read_filters()
        self._compiled = [(re.compile(p), list_name, p, reason)
                          for list_name, p, reason in self.filters]

    def info(self, test_name):
        return self.cases.get(test_name[:-len(DEVICE_SUFFIX)]
                              if test_name.endswith(DEVICE_SUFFIX) else test_name)

    def status(self, test_name):
        """(status, reason) of the runner's test `test_name` ("test_abs_cpu")."""
        info = self.info(test_name)
        reason = unsupported_reason(info, self.table)
        if reason is not None:
            return UNSUPPORTED, reason
        for regex, list_name, pattern, why in self._compiled:
            if regex.search(test_name):
                return EXCLUDED, f"{list_name}: {why} (onnx_backend_filters.jsonc: {pattern})"
        return RUN, ""


def backend_test_cases(classification=None):
    """The unittest.TestCase classes of the suite, CPU tests only, with each test that does
    not run wrapped in unittest.skip giving its reason; and the Classification."""
    classification = classification or Classification()
    backend_test = onnx.backend.test.BackendTest(sluice_backend, __name__)
    test_cases = backend_test.test_cases
    for cls in test_cases.values():
        for attr in [a for a in vars(cls) if a.startswith("test_")]:
            if not attr.endswith(DEVICE_SUFFIX):
                delattr(cls, attr)  # another device's variant
                continue
            status, reason = classification.status(attr)
            if status != RUN:
                setattr(cls, attr, unittest.skip(reason)(getattr(cls, attr)))
    return test_cases, classification


_test_cases, _classification = backend_test_cases()
globals().update(_test_cases)


def _collected_names():
    return [a for cls in _test_cases.values() for a in vars(cls) if a.startswith("test_")]


def test_every_filter_has_a_reason():
    missing = [p for _, p, reason in _classification.filters if not reason]
    assert not missing, f"filter patterns without a reason comment: {missing}"


def test_every_filter_matches_a_supported_test():
    """A pattern that only matches tests skipped for their op types (or none) is stale."""
    names = _collected_names()
    stale = []
    for list_name, pattern, _ in _classification.filters:
        regex = re.compile(pattern)
        if not any(regex.search(n) and _classification.status(n)[0] != UNSUPPORTED
                   for n in names):
            stale.append(f"{list_name}: {pattern}")
    assert not stale, f"filter patterns that match no test of supported op types: {stale}"


def test_suite_runs_tests_of_every_kind():
    """The classification found the tests: node tests in memory and the model tests on disk
    both run (a broken loader would make the whole suite skip)."""
    run = collections.Counter(
        _classification.info(n).kind for n in _collected_names()
        if _classification.info(n) is not None and _classification.status(n)[0] == RUN)
    assert run["node"] >= 100 and run["pytorch-operator"] >= 1, run


def test_excluded_tests_still_fail():
    """Each excluded test fails when run anyway: a pattern that excludes a passing test is
    too broad, or what it names was fixed (narrow or drop it). "real" tests are not run
    (they download their models)."""
    passing = []
    for cls in _test_cases.values():
        for name in [a for a in vars(cls) if a.startswith("test_")]:
            if (_classification.status(name)[0] != EXCLUDED
                    or _classification.info(name) is None):
                continue
            run = getattr(getattr(cls, name), "__wrapped__", None)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    run(cls(name))
            except Exception:  # noqa: BLE001 (any failure: rightly excluded)
                continue
            passing.append(name)
    assert not passing, f"excluded tests that pass: {passing}"
