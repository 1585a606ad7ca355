#!/usr/bin/env python3
"""Writes or checks the contents list of a Markdown document.

The list sits between the lines `<!-- contents -->` and `<!-- /contents -->` and names
every `##` section, with its `###` subsections indented below it, each linked by the
anchor GitHub gives the heading.

  scripts/doc_contents.py docs/design.md          rewrite the list in place
  scripts/doc_contents.py --check docs/design.md  exit 1 (naming what differs) when the
                                                  list is not the one the headings give
  scripts/doc_contents.py --self-test             proves --check fails on a stale list
"""
import argparse
import re
import sys

BEGIN = "<!-- contents -->"
END = "<!-- /contents -->"


def anchor(title, seen):
    """GitHub's anchor: lower case, punctuation dropped, spaces to hyphens, -N when repeated."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
    n = seen.get(text, 0)
    seen[text] = n + 1
    return text if n == 0 else f"{text}-{n}"


def contents(lines):
    seen, out, fenced = {}, [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        m = re.match(r"^(#{1,3}) (.*)$", line)
        if not m:
            continue
        level, title = len(m.group(1)), m.group(2).strip()
        link = anchor(title, seen)
        if level == 2:
            out.append(f"- [{title}](#{link})")
        elif level == 3:
            out.append(f"  - [{title}](#{link})")
    return out


def self_test():
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        doc = f"{tmp}/doc.md"
        open(doc, "w").write(f"# T\n\n{BEGIN}\n{END}\n\n## A b\n\n### C\n\n```\n## not a heading\n```\n")
        run = lambda *a: subprocess.run([sys.executable, __file__, *a, doc],
                                        capture_output=True).returncode
        if run("--check") != 1:
            print("self-test: an empty list passed --check", file=sys.stderr)
            return 1
        run()
        want = f"{BEGIN}\n- [A b](#a-b)\n  - [C](#c)\n{END}"
        if want not in open(doc).read() or run("--check") != 0:
            print("self-test: the written list is wrong or fails --check", file=sys.stderr)
            return 1
        open(doc, "a").write("\n## D\n")
        if run("--check") != 1:
            print("self-test: a new heading passed --check", file=sys.stderr)
            return 1
    print("doc_contents self-test: ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check instead of rewriting")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failed = False
    for path in args.files:
        lines = open(path, encoding="utf-8").read().split("\n")
        if BEGIN not in lines or END not in lines:
            print(f"{path}: no '{BEGIN}' ... '{END}' lines", file=sys.stderr)
            failed = True
            continue
        b, e = lines.index(BEGIN), lines.index(END)
        want = contents(lines)
        if args.check:
            if lines[b + 1:e] != want:
                missing = [w for w in want if w not in lines[b + 1:e]]
                stale = [h for h in lines[b + 1:e] if h not in want]
                print(f"{path}: contents list out of date (run scripts/doc_contents.py {path})",
                      file=sys.stderr)
                for w in missing:
                    print(f"  missing: {w.strip()}", file=sys.stderr)
                for h in stale:
                    print(f"  stale:   {h.strip()}", file=sys.stderr)
                failed = True
            continue
        lines[b + 1:e] = want
        open(path, "w", encoding="utf-8").write("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
