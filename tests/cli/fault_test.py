#!/usr/bin/env python3
"""Faults around the caches, through the nnc CLI: each run must still give the right outputs
(checked with --expected-dir against the model's test data) and say on stderr what it
skipped: one `nnc: warning:` line per fault (per corrupted entry), and nothing else.

- the object cache's directory cannot be created or written (its parent is a file: the
  same failure as a read-only directory, also when the test runs as root);
- the disk fills up while a cached object is written (RLIMIT_FSIZE, SIGXFSZ ignored: writes
  fail with EFBIG as they would with ENOSPC);
- cached objects corrupted (bytes flipped inside: a file that still loads as an object) or
  truncated: nnc recompiles, says so, and the next run is a clean cache hit again;
- index entries (kernels -> object key) that are garbage, missing, or name an object that is
  gone: a garbage or missing entry is a hit through the object's own key, silently, and is
  rewritten; a gone object is a silent miss;
- the tuning database is not a database;
- OpenCL (when a device is there): a corrupted cached program binary is rebuilt from source,
  and a device that fails the optimized build (NNC_FAULT=opencl-build) builds it with
  -cl-opt-disable.

Usage: fault_test.py NNC_BINARY
"""
import glob
import os
import resource
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(ROOT, "examples", "models", "tiny_cnn")
NNC = sys.argv[1]


def full_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


def main():
    failures = []
    work = tempfile.mkdtemp(prefix="nnc-fault-")
    base_env = dict(os.environ, HOME=work, XDG_CACHE_HOME=os.path.join(work, "xdg"))
    base_env.pop("NNC_TUNING_CACHE", None)
    data = os.path.join(MODEL_DIR, "test_data_set_0")
    run_args = [NNC, "run", os.path.join(MODEL_DIR, "model.onnx"), "--inputs-dir", data,
                "--expected-dir", data]

    def run(what, cache_dir, want_warning=None, tuning=None, target=None, preexec=None,
            want_cache=None):
        env = dict(base_env, NNC_CACHE_DIR=cache_dir)
        if tuning:
            env["NNC_TUNING_CACHE"] = tuning
        args = run_args + (["--target", target] if target else [])
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300,
                           preexec_fn=preexec)
        warnings = [l for l in r.stderr.splitlines() if l.startswith("nnc: warning:")]
        problem = None
        if r.returncode != 0:
            problem = f"exit {r.returncode}"
        elif want_warning is None and warnings:
            problem = f"unexpected warnings {warnings}"
        elif want_warning is not None and not any(want_warning in w for w in warnings):
            problem = f"no warning containing '{want_warning}'"
        elif want_warning is not None and not all(want_warning in w for w in warnings):
            problem = f"warnings about something else too: {warnings}"
        elif want_cache and f"compile cache: {want_cache}" not in r.stdout:
            problem = f"not a cache {want_cache}"
        if problem:
            failures.append(f"{what}: {problem}\n{r.stdout}{r.stderr}")
            print(f"FAIL {what}: {problem}")
        else:
            print(f"ok   {what}: {warnings[0] if warnings else 'no warning'}")
        return r

    # A fresh cache: a miss, then a hit; no warnings.
    cache = os.path.join(work, "objects")
    run("fresh cache", cache, want_cache="miss")
    run("cached", cache, want_cache="hit")
    objects = glob.glob(os.path.join(cache, "*.o"))
    if not objects:
        failures.append(f"no cached objects in {cache}")
    indexes = glob.glob(os.path.join(cache, "*.idx"))
    if len(indexes) != len(objects):
        failures.append(f"{len(indexes)} index entries for {len(objects)} objects in {cache}")

    # Index entries: garbage, then none, then pointing at objects that are gone.
    for i in indexes:
        with open(i, "w") as f:
            f.write("not a key\n")
    run("garbage index entries", cache, want_cache="hit")
    if any(open(i).read() == "not a key\n" for i in indexes):
        failures.append("garbage index entries were not rewritten")
    for i in indexes:
        os.remove(i)
    run("no index entries", cache, want_cache="hit")
    if len(glob.glob(os.path.join(cache, "*.idx"))) != len(indexes):
        failures.append("index entries were not written again")
    moved = os.path.join(work, "objects-moved")
    os.makedirs(moved)
    for o in objects:
        os.rename(o, os.path.join(moved, os.path.basename(o)))
    run("index entries naming objects that are gone", cache, want_cache="miss")
    run("cached again", cache, want_cache="hit")

    # Corrupted entries: bytes flipped in the middle, then truncation.
    for o in objects:
        with open(o, "r+b") as f:
            size = os.path.getsize(o)
            f.seek(size // 2)
            chunk = f.read(16)
            f.seek(size // 2)
            f.write(bytes(b ^ 0xFF for b in chunk))
    run("corrupted cached objects", cache, want_warning="corrupted", want_cache="miss")
    run("rewritten after corruption", cache, want_cache="hit")
    for o in objects:
        os.truncate(o, os.path.getsize(o) // 2)
    run("truncated cached objects", cache, want_warning="corrupted", want_cache="miss")

    # A cache directory that cannot be created (its parent is a file).
    blocker = os.path.join(work, "not-a-dir")
    with open(blocker, "w") as f:
        f.write("x")
    run("unwritable cache directory", os.path.join(blocker, "objects"),
        want_warning="cannot write")

    # A full disk while writing the cache.
    run("full disk", os.path.join(work, "objects-full"), want_warning="cannot write",
        preexec=full_disk)

    # A tuning database that is not a database.
    bad_db = os.path.join(work, "tuning.db")
    with open(bad_db, "wb") as f:
        f.write(b"this is not an SQLite database" * 100)
    run("corrupted tuning database", cache, want_warning="without tuned configs", tuning=bad_db)

    # OpenCL: a corrupted cached program binary.
    devices = subprocess.run([NNC, "devices"], capture_output=True, text=True, env=base_env)
    if "opencl:" in devices.stdout:
        cl_cache = os.path.join(work, "opencl")
        run("opencl fresh cache", cl_cache, target="opencl")
        binaries = glob.glob(os.path.join(cl_cache, "**", "*.bin"), recursive=True)
        if not binaries:
            failures.append(f"opencl: no cached program binaries under {cl_cache}")
        for b in binaries:
            size = os.path.getsize(b)
            with open(b, "r+b") as f:
                f.seek(size - size // 3)
                f.write(b"\xff" * 64)
        run("opencl corrupted program binary", cl_cache, target="opencl",
            want_warning="corrupted")
        # A device that fails the (optimized) build: built unoptimized, right results.
        fault_env = dict(base_env, NNC_FAULT="opencl-build")
        saved = dict(base_env)
        base_env.clear()
        base_env.update(fault_env)
        run("opencl device failing the optimized build", os.path.join(work, "opencl-fault"),
            target="opencl", want_warning="-cl-opt-disable")
        base_env.clear()
        base_env.update(saved)
    else:
        print("SKIP opencl: no OpenCL device (nnc devices lists none)")

    print(f"fault cases: {len(failures)} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
