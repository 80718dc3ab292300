#!/usr/bin/env python3
"""The longest functions under src/ (lines from `fn` to its closing brace),
longest first: what the rule "no function over 150 lines" is measured with.

Usage: scripts/longest-functions.py [COUNT] [FOLDER]
"""
import os
import re
import sys

FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def functions(path):
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m or lines[i].strip().startswith("//"):
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            code = lines[j].split("//")[0]
            for ch in code:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth == 0:
                break
            if not opened and code.rstrip().endswith(";"):
                break
            j += 1
        if opened:
            yield j - i + 1, m.group(6), i + 1
            i = j + 1
        else:
            i += 1


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    folder = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "src")
    found = []
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(root, f)
                found += [(n, os.path.relpath(path, os.path.join(folder, "..")), name, line) for n, name, line in functions(path)]
    for n, path, name, line in sorted(found, reverse=True)[:count]:
        print(f"{n:5d}  {path}:{line}  {name}")


if __name__ == "__main__":
    main()
