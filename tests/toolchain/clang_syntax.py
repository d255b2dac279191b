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

A file that passed is not checked again while nothing it reads has changed: BUILD_DIR/
clang_syntax.cache keeps, per passed file, a key made of clang's version, the file's clang
command and the path, modification time and size of every file it includes. The include list is
GCC's, from the build's dependency log (`ninja -t deps`): the test command builds before it tests,
so the log is current; a file the log does not list as up to date is always checked. A rerun of
the test command after a change so checks only the files that change reaches.

Speed: most of a file's front-end time is its headers (the standard library, fmt, LLVM, gtest,
nnc's IR), the same for most files of a target. Files that share one clang command (but for
the file) share one precompiled header: the #include lines at the top of the files, those that
at least COMMON of the group have. A file is parsed with `-include-pch`, most of its includes
already there. A file whose top mixes includes with #define or #if, and a group of fewer than
MIN_GROUP files, are parsed as they are. The header is only a shortcut: a group whose header
does not compile is checked file by file without it (the error shows there), and a file that
fails with it is checked again without it, so only a failure of the plain command fails the
check.

Usage: clang_syntax.py BUILD_DIR SOURCE_DIR [--jobs N] [--clang clang++-15] [--only REGEX]
                       [--no-cache]
(--only: the files whose path relative to SOURCE_DIR matches REGEX, for a quick rerun;
--no-cache: check every file and leave the cache as it is)
Exit: 0 when every file compiles, 1 when one does not (each failure's errors are printed) or
when clang-15 is missing (scripts/setup.sh installs it: a missing compiler is a broken set-up,
not a reason to pass).
"""
import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# A precompiled header pays for itself from a few files on (building it costs about as much as
# parsing one file of its group).
MIN_GROUP = 3
# A header is in a group's precompiled header where at least this share of the group's files
# include it at their top: the union of all of them made a bigger header that every file pays
# to load, and checking all files took longer than with this share.
COMMON = 0.25

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


def top_includes(path):
    """The #include lines of a source file before its first line of code, in order, with a
    quoted include found next to the file made absolute; None when a #define, #undef or
    conditional is among them (prepending them all could then change what the file sees)."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out, in_comment = [], False
    for line in lines:
        t = line.strip()
        if in_comment:
            in_comment = "*/" not in t
            continue
        if not t or t.startswith("//"):
            continue
        if t.startswith("/*"):
            in_comment = "*/" not in t
            continue
        m = re.match(r'#\s*include\s*([<"])([^>"]+)[>"]', t)
        if m:
            name = m.group(2)
            if m.group(1) == '"':
                near = os.path.join(os.path.dirname(path), name)
                out.append(f'"{os.path.realpath(near)}"' if os.path.exists(near) else f'"{name}"')
            else:
                out.append(f"<{name}>")
            continue
        if re.match(r"#\s*pragma\s+once", t):
            continue
        if t.startswith("#"):
            return None
        break
    return out


def build_pchs(groups, folder, jobs):
    """{group key: path of its precompiled header in `folder`} for each group whose header
    compiles; `groups` maps a key (the directory, then the clang command without the file) to
    its files' include lists."""

    def build(item):
        key, include_lists = item
        # The includes of at least COMMON of the files, in the order they first come.
        count = {}
        for includes in include_lists:
            for inc in dict.fromkeys(includes):
                count[inc] = count.get(inc, 0) + 1
        lines = [inc for inc, n in count.items() if n >= COMMON * len(include_lists)]
        name = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
        header = os.path.join(folder, name + ".h")
        pch = header + ".pch"
        with open(header, "w") as f:
            f.write("".join(f"#include {inc}\n" for inc in lines))
        directory, clang, flags = key[0], key[1], list(key[2:])
        r = subprocess.run([clang, "-x", "c++-header", header, "-o", pch] + flags,
                           capture_output=True, text=True, cwd=directory)
        return key, (pch if r.returncode == 0 else None)

    with ThreadPoolExecutor(max(jobs, 1)) as pool:
        return {k: v for k, v in pool.map(build, groups.items()) if v}


def object_of(entry):
    """The object file a compile_commands entry writes (its -o), relative to its directory."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    for i, a in enumerate(args[:-1]):
        if a == "-o":
            return args[i + 1]
    return None


def dependency_log(build_dir):
    """{object path: [files it read]} for the objects whose ninja deps entry is VALID."""
    try:
        r = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True,
                           text=True)
    except OSError:
        return {}
    deps, current = {}, None
    for line in r.stdout.splitlines():
        if not line.startswith(" "):
            m = re.match(r"^(.*): #deps \d+, deps mtime \d+ \((\w+)\)", line)
            current = None
            if m and m.group(2) == "VALID":
                current = deps.setdefault(m.group(1), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return deps


def cache_key(version, args, directory, files):
    """The key of one check: clang's version, its command, and each input's stat; None when
    an input is gone (the file must be checked)."""
    h = hashlib.sha256()
    h.update(version.encode())
    h.update("\0".join(args).encode())
    for f in files:
        try:
            st = os.stat(os.path.join(directory, f))
        except OSError:
            return None
        h.update(f"\0{f}\0{st.st_mtime_ns}\0{st.st_size}".encode())
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_dir")
    p.add_argument("source_dir")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--clang", default="clang++-15")
    p.add_argument("--only", help="check only the files whose relative path matches this regex")
    p.add_argument("--no-cache", action="store_true",
                   help="check every file; neither read nor write the cache")
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

    cache_path = os.path.join(a.build_dir, "clang_syntax.cache")
    cache, keys = {}, {}
    if not a.no_cache:
        version = subprocess.run([a.clang, "--version"], capture_output=True,
                                 text=True).stdout
        log = dependency_log(a.build_dir)
        for path, e in files:
            obj = object_of(e)
            if obj is not None and obj in log:
                keys[path] = cache_key(version, clang_args(e, a.clang), e["directory"],
                                       log[obj])
        try:
            with open(cache_path) as f:
                cache = json.load(f)
        except (OSError, ValueError):
            cache = {}
    todo = [(p, e) for p, e in files if keys.get(p) is None or cache.get(p) != keys[p]]

    # The files to check that can share a precompiled header, grouped by their command.
    def group_key(path, e):
        """The file's directory and clang command without the file and -fsyntax-only."""
        args = clang_args(e, a.clang)
        return (e["directory"],) + tuple(
            x for x in args if x != "-fsyntax-only"
            and os.path.realpath(os.path.join(e["directory"], x)) != path)

    includes = {p: top_includes(p) for p, _ in todo}
    groups = {}
    for path, e in todo:
        if includes[path]:
            groups.setdefault(group_key(path, e), []).append(path)
    groups = {k: v for k, v in groups.items() if len(v) >= MIN_GROUP}
    start = time.monotonic()
    failed = []
    # The headers (tens of MB each) live only as long as the check.
    with tempfile.TemporaryDirectory(prefix="clang_syntax_pch.", dir=build) as folder:
        pchs = build_pchs({k: [includes[p] for p in v] for k, v in groups.items()}, folder,
                          a.jobs)
        pch_of = {p: pchs[k] for k, v in groups.items() if k in pchs for p in v}

        def check(item):
            path, e = item
            plain = clang_args(e, a.clang)
            if path in pch_of:
                r = subprocess.run(plain[:1] + ["-include-pch", pch_of[path]] + plain[1:],
                                   cwd=e["directory"], capture_output=True, text=True)
                if r.returncode == 0:
                    return path, 0, ""
            r = subprocess.run(plain, cwd=e["directory"], capture_output=True, text=True)
            return path, r.returncode, r.stderr

        with ThreadPoolExecutor(max(a.jobs, 1)) as pool:
            for path, rc, err in pool.map(check, todo):
                if rc != 0:
                    failed.append(os.path.relpath(path, src))
                    print(f"FAIL {os.path.relpath(path, src)}\n{err}")
                    cache.pop(path, None)
                elif keys.get(path) is not None:
                    cache[path] = keys[path]
    secs = time.monotonic() - start
    if not a.no_cache:
        tmp = cache_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(cache, f, indent=0, sort_keys=True)
        os.replace(tmp, cache_path)
    print(f"clang-15 -fsyntax-only: {len(todo) - len(failed)} passed, {len(failed)} failed "
          f"({len(todo)} of {len(files)} files checked, the rest unchanged since they passed; "
          f"{len(pch_of)} with one of {len(pchs)} precompiled headers; {secs:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
