#!/usr/bin/env python3
"""Checks that no source file of the compiler's core folders grows past 1,000 lines.

A file that long holds several ideas (issue 51 split NN.cpp, Layout.cpp, LaunchPlan.cpp and
OpenCLLaunchList.cpp along theirs); the limit makes the next split happen when the second idea
arrives rather than at the next review. Applies to the .cpp, .h and .def files under ir/,
passes/, codegen/ and runtime/, recursively.

Usage: check_file_sizes.py SOURCE_DIR [LIMIT]. Prints each file over LIMIT (default 1000)
lines as path: N lines and exits 1 when there is one, 0 otherwise.
"""
import os
import sys

FOLDERS = ("ir", "passes", "codegen", "runtime")
SUFFIXES = (".cpp", ".h", ".def")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    root = argv[1]
    limit = int(argv[2]) if len(argv) > 2 else 1000
    over, seen = [], 0
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    lines = sum(1 for _ in f)
                seen += 1
                if lines > limit:
                    over.append((os.path.relpath(path, root), lines))
    if seen == 0:
        print(f"check_file_sizes: no source files under {root}", file=sys.stderr)
        return 1
    for path, lines in over:
        print(f"{path}: {lines} lines (limit {limit}): split it along its ideas")
    if over:
        return 1
    print(f"ok: {seen} files, none over {limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
