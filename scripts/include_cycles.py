#!/usr/bin/env python3
"""Finds include cycles between components of the library.

A component is a header and its source file (vm/blob.h + vm/blob.cc). Component A
depends on B when A's header or source includes B's header. A cycle (A needs B, B needs A,
perhaps through others) means neither can be understood, tested or moved alone; the layer
check (scripts/check_layering.sh) sees only cycles between layers, this one those inside
a layer. Tests, benchmarks, examples and the Python bindings are not components.

The cycles that exist today are listed in scripts/include_cycles.allow, one per line (its
components, sorted, separated by spaces). The check fails on a cycle that is not listed
and on a listed one that is gone (so the list only shrinks).

  scripts/include_cycles.py [ROOT]        check ROOT (default: the repository)
  scripts/include_cycles.py --list [ROOT] print every cycle, allowed or not
  scripts/include_cycles.py --self-test   check a small tree with a known cycle (proves the
                                          check can fail)
"""
import io
import os
import re
import subprocess
import sys
import tempfile

SKIP = {"tests", "bench", "examples", "python"}  # top-level folders that are not components
SUFFIX = re.compile(r"\.(cc|h|cu)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root):
    for base, dirs, files in os.walk(root):
        rel = os.path.relpath(base, root)
        dirs[:] = [d for d in dirs if not (rel == "." and (d in SKIP or d.startswith(("build", "."))))]
        for f in files:
            if SUFFIX.search(f):
                yield os.path.normpath(os.path.join(rel, f))


def cycles(root):
    files = list(sources(root))
    components = {SUFFIX.sub("", f) for f in files}
    graph = {c: set() for c in components}
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        me = SUFFIX.sub("", f)
        for inc in INCLUDE.findall(text):
            other = SUFFIX.sub("", inc)
            if other in components and other != me:
                graph[me].add(other)
    # Tarjan's strongly connected components, iteratively.
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    out.append(" ".join(sorted(scc)))
    return sorted(out)


def check(root, allow_path, err=None):
    err = err or sys.stderr
    found = set(cycles(root))
    allowed = set()
    if os.path.exists(allow_path):
        for line in open(allow_path, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                allowed.add(" ".join(sorted(line.split())))
    failed = False
    for c in sorted(found - allowed):
        print(f"include cycle: {c.replace(' ', ' <-> ')}", file=err)
        failed = True
    for c in sorted(allowed - found):
        print(f"{allow_path}: listed cycle is gone, remove the line: {c}", file=err)
        failed = True
    if not failed and err is sys.stderr:
        print(f"include cycles: {len(found)}, all listed in {os.path.basename(allow_path)}")
    return 1 if failed else 0


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            open(os.path.join(root, path), "w").write(text)
        write("vm/a.h", '#include "vm/b.h"\n')
        write("vm/b.h", "\n")
        write("vm/b.cc", '#include "vm/b.h"\n#include "vm/a.h"\n')
        write("vm/c.h", '#include "vm/a.h"\n')
        write("tests/t.h", '#include "vm/c.h"\n')
        write("tests/t.cc", '#include "tests/t.h"\n')
        write("vm/d.h", '#include "tests/t.h"\n')  # tests/ is not a component: no cycle
        got = cycles(root)
        if got != ["vm/a vm/b"]:
            print(f"self-test: expected the cycle vm/a <-> vm/b, found {got}", file=sys.stderr)
            return 1
        allow = os.path.join(root, "allow")
        open(allow, "w").write("")
        if check(root, allow, io.StringIO()) != 1:
            print("self-test: an unlisted cycle passed", file=sys.stderr)
            return 1
        open(allow, "w").write("vm/b vm/a\n")
        if check(root, allow, io.StringIO()) != 0:
            print("self-test: a listed cycle failed", file=sys.stderr)
            return 1
        write("vm/b.cc", '#include "vm/b.h"\n')
        if check(root, allow, io.StringIO()) != 1:
            print("self-test: a listed cycle that is gone passed", file=sys.stderr)
            return 1
    print("include_cycles self-test: ok")
    return 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    if argv[:1] == ["--self-test"]:
        return self_test()
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    listing = argv[:1] == ["--list"]
    if listing:
        argv = argv[1:]
    root = argv[0] if argv else os.path.dirname(here)
    if listing:
        for c in cycles(root):
            print(c)
        return 0
    return check(root, os.path.join(here, "include_cycles.allow"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
