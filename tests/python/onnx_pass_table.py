"""The pass table of ONNX's backend test suite on sluice.onnx, by op type (docs/onnx.md).

Runs the suite as tests/python/test_onnx_backend.py does (same classification, same
filters) and prints Markdown: for each op type the importer maps, its node tests — all of
them, those that ran, passed, excluded by onnx_backend_filters.jsonc, and those that need
another op type or opset the importer lacks (expansions into other ops, mostly) — then the
totals of every kind of test, the failures and the excluded tests that pass when run anyway
(their patterns are stale), if any; it exits 1 when there are some. A node test counts for
the op type it tests (the op an `_expanded` test expands). Run with the package and onnx importable:

    python tests/python/onnx_pass_table.py [--out FILE]
"""

import argparse
import collections
import os
import sys
import time
import unittest


def run_suite():
    """{test name: (kind, op type or None, status, outcome)}: status is the
    classification's, outcome "passed", "failed" or "skipped"."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_onnx_backend as suite

    classification = suite._classification
    test_cases = suite._test_cases
    rows = {}
    for cls in test_cases.values():
        for name in sorted(a for a in vars(cls) if a.startswith("test_")):
            result = unittest.TestResult()
            cls(name).run(result)
            if result.skipped:
                outcome = "skipped"
            elif result.wasSuccessful():
                outcome = "passed"
            else:
                outcome = "failed"
            info = classification.info(name)
            status, _ = classification.status(name)
            # ("real" tests would download their models: never run.)
            if status == "excluded" and info is not None and _passes_unskipped(cls, name):
                outcome = "excluded-but-passes"
            rows[name] = (info.kind if info else "real", info.op_type if info else None,
                          status, outcome, bool(info and info.float32))
    return rows, classification


def _passes_unskipped(cls, name):
    """Whether the excluded test `name` passes when run anyway (its pattern is stale)."""
    func = getattr(getattr(cls, name), "__wrapped__", None)
    if func is None:
        return False
    try:
        func(cls(name))
    except BaseException:  # noqa: BLE001 (any failure: it is rightly excluded)
        return False
    return True


def markdown(rows, classification, seconds):
    from test_onnx_backend import EXCLUDED, RUN, UNSUPPORTED

    per_op = collections.defaultdict(collections.Counter)
    for kind, op, status, outcome, _ in rows.values():
        if kind != "node" or op is None:
            continue
        c = per_op[op]
        c["tests"] += 1
        c["run"] += status == RUN
        c["passed"] += status == RUN and outcome == "passed"
        c["excluded"] += status == EXCLUDED
        c["other"] += status == UNSUPPORTED
    lines = ["| Op type | Node tests | Run | Passed | Excluded (filters) "
             "| Need other ops or opsets |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for op in sorted(classification.table):
        c = per_op.get(op, collections.Counter())
        lines.append(f"| {op} | {c['tests']} | {c['run']} | {c['passed']} | {c['excluded']} "
                     f"| {c['other']} |")
    lines.append("")
    totals = collections.defaultdict(collections.Counter)
    for kind, _, status, outcome, _ in rows.values():
        t = totals[kind]
        t["tests"] += 1
        t[status] += 1
        t["passed"] += status == RUN and outcome == "passed"
        t["failed"] += outcome == "failed"
    lines += ["| Kind | Tests | Run | Passed | Failed | Excluded (filters) "
              "| Unsupported op type or opset |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind in ("node", "simple", "pytorch-converted", "pytorch-operator", "real"):
        t = totals.get(kind)
        if t:
            lines.append(f"| {kind} | {t['tests']} | {t[RUN]} | {t['passed']} | {t['failed']} "
                         f"| {t[EXCLUDED]} | {t[UNSUPPORTED]} |")
    all_ = sum(totals.values(), collections.Counter())
    lines.append(f"| all | {all_['tests']} | {all_[RUN]} | {all_['passed']} | {all_['failed']} "
                 f"| {all_[EXCLUDED]} | {all_[UNSUPPORTED]} |")
    f32 = [(status, outcome) for kind, _, status, outcome, float32 in rows.values()
           if kind == "node" and float32]
    f32_passed = sum(1 for status, outcome in f32 if status == RUN and outcome == "passed")
    lines += ["", f"Float32 node tests (every graph input and output a FLOAT tensor): "
              f"{f32_passed} of {len(f32)} pass ({100.0 * f32_passed / max(1, len(f32)):.1f}%)."]
    failed = sorted(n for n, (_, _, _, outcome, _) in rows.items() if outcome == "failed")
    stale = sorted(n for n, (_, _, _, outcome, _) in rows.items()
                   if outcome == "excluded-but-passes")
    lines += ["", f"Ran in {seconds:.1f} s (CPU tests only; the excluded ones run as well, "
              "to find those that pass)."]
    if failed:
        lines += ["", "Failed: " + ", ".join(failed)]
    if stale:
        lines += ["", "Excluded but passing (narrow their patterns): " + ", ".join(stale)]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the Markdown here instead of printing it")
    args = parser.parse_args()
    start = time.monotonic()
    rows, classification = run_suite()
    text = markdown(rows, classification, time.monotonic() - start)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 1 if "\nFailed: " in text or "\nExcluded but passing" in text else 0


if __name__ == "__main__":
    sys.exit(main())
