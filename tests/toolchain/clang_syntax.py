#!/usr/bin/env python3
"""Fails when clang-15 cannot compile a source file of the project that GCC builds.

The sanitizer builds (scripts/sanitize.sh) and the fuzzers (scripts/fuzz.sh) compile nnc with
clang-15, and the test build compiles it with GCC. GCC accepts some code that clang rejects
(a lambda capturing a structured binding is a C++20 feature that GCC allows in C++17 mode), so
such code rotted unseen until someone ran a sanitizer. This check runs clang-15's front end
alone (-fsyntax-only: parsing, semantic analysis and template instantiation, the stages where
those differences live; no code generation) on every translation unit of the build's
compile_commands.json, with the build's own include paths, definitions and language flags.

Only errors fail the check (warnings are off: the project does not build with -Werror, and
GCC's warnings are what the test build shows). Generated sources (protobuf's) are skipped.

Usage: clang_syntax.py BUILD_DIR SOURCE_DIR [--jobs N] [--clang clang++-15] [--only REGEX]
(--only: the files whose path relative to SOURCE_DIR matches REGEX, for a quick rerun)
Exit: 0 when every file compiles, 1 when one does not (each failure's errors are printed) or
when clang-15 is missing (scripts/setup.sh installs it: a missing compiler is a broken set-up,
not a reason to pass).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# GCC's code-generation and warning options that clang does not know or that do not matter
# to a syntax check; dropping them keeps clang from failing on an unknown flag instead of on
# the code.
DROP_PREFIXES = ("-W", "-fno-fat-lto-objects", "-flto", "-fipa", "-fno-semantic-interposition")


def clang_args(entry, clang):
    """The clang command of one compile_commands entry: its -I/-D/-std/-f flags, no output."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    # A launcher (ccache) may stand before the compiler.
    while args and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith(DROP_PREFIXES):
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-w", "-ferror-limit=20"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("source_dir")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--clang", default="clang++-15")
    p.add_argument("--only", help="check only the files whose relative path matches this regex")
    a = p.parse_args()
    if shutil.which(a.clang) is None:
        print(f"{a.clang} is not installed (scripts/setup.sh installs it with clang-15)")
        return 1
    db = os.path.join(a.build_dir, "compile_commands.json")
    try:
        with open(db) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{db}: {e} (the build exports it: CMAKE_EXPORT_COMPILE_COMMANDS)")
        return 1
    src = os.path.realpath(a.source_dir)
    build = os.path.realpath(a.build_dir)
    files = []
    seen = set()
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        # The project's own sources: not generated ones, not another tree's.
        if not path.startswith(src + os.sep) or path.startswith(build + os.sep):
            continue
        if path.endswith(".c"):
            continue  # C sources (bench peers) are not part of the C++ clang builds
        if a.only and not re.search(a.only, os.path.relpath(path, src)):
            continue
        if path in seen:
            continue  # the same file in two targets: one check is enough
        seen.add(path)
        files.append((path, e))
    if not files:
        print(f"{db} names no source file under {src}")
        return 1

    def check(item):
        path, e = item
        r = subprocess.run(clang_args(e, a.clang), cwd=e["directory"], capture_output=True,
                           text=True)
        return path, r.returncode, r.stderr

    start = time.monotonic()
    failed = []
    with ThreadPoolExecutor(max(a.jobs, 1)) as pool:
        for path, rc, err in pool.map(check, files):
            if rc != 0:
                failed.append(os.path.relpath(path, src))
                print(f"FAIL {os.path.relpath(path, src)}\n{err}")
    secs = time.monotonic() - start
    print(f"clang-15 -fsyntax-only: {len(files) - len(failed)} passed, {len(failed)} failed "
          f"({len(files)} files, {secs:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
