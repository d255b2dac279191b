#!/usr/bin/env python3
"""Memory that stays bounded: reports the resident set (RSS) of one process that

  runs  - runs one compiled model (default: the shared mlp_b1, 1 thread) N times (default
          100,000) on the same inputs: RSS after run 1,000 and after run N, and their ratio
          (the bar: within 1%), with RSS every N/10 runs;
  sizes - runs a model with a symbolic batch (Reshape to [N, -1], MatMul, Add; built here)
          with S distinct batch sizes (default 200), compiled per size: RSS after the cache
          of specialized programs filled (16), after 50 and after S sizes, and how many times
          the cache said (verbose) that it dropped a program.

Through the Python package (build/python; PYTHONPATH is set here). The short versions of both
are unit tests (BoundedMemory.*); this is the long check, which reports and asserts nothing.

    python3 bench/memory_check.py [--build build] [--model DIR] [--runs 100000]
                                  [--sizes 200] [--only runs|sizes] [--out FILE.md]

With --out, writes the report there too, under the machine header.

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import platform
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, proc, report  # noqa: E402
from nncbench.nnc import ROOT  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import model, node, tensor, value_info, attr_int  # noqa: E402

INT64 = 7
# The package is built for the system python3 (the one Debian's numpy serves).
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def batched_model():
    """x: [N, 2, 3] -> Reshape([N, -1]) -> MatMul([6, 2]) -> Add([2]): y [N, 2]."""
    nodes = [
        node("Shape", ["x"], ["s"], "shape"),
        node("Gather", ["s", "zero"], ["n"], "gather", [attr_int("axis", 0)]),
        node("Unsqueeze", ["n", "axes0"], ["n1"], "unsqueeze"),
        node("Concat", ["n1", "minus1"], ["newshape"], "concat", [attr_int("axis", 0)]),
        node("Reshape", ["x", "newshape"], ["flat"], "reshape"),
        node("MatMul", ["flat", "w"], ["mm"], "matmul"),
        node("Add", ["mm", "b"], ["y"], "add"),
    ]
    inits = [
        tensor("zero", [], [0], data_type=INT64, fmt="q"),
        tensor("axes0", [1], [0], data_type=INT64, fmt="q"),
        tensor("minus1", [1], [-1], data_type=INT64, fmt="q"),
        tensor("w", [6, 2], [0.5, -1.0, 1.5, 2.0, -0.25, 0.75, 1.0, 0.0, -2.0, 0.5, 0.25, -1.5]),
        tensor("b", [2], [0.125, -0.5]),
    ]
    return model(nodes, [value_info("x", ["N", 2, 3])], [value_info("y", ["N", 2])], inits)


def child_runs(args):
    import nnc
    import numpy as np
    m = nnc.compile(os.path.join(args.model, "model.onnx"), threads=1)
    data = os.path.join(args.model, "test_data_set_0")
    inputs = []
    k = 0
    while os.path.exists(os.path.join(data, f"input_{k}.pb")):
        inputs.append(nnc.load_tensor(os.path.join(data, f"input_{k}.pb")))
        k += 1
    step = max(1, args.runs // 10)
    t0 = time.monotonic()
    for i in range(1, args.runs + 1):
        m(*inputs)
        if i == 1000 or i % step == 0:
            print(f"run {i} {rss_kib()}", flush=True)
    print(f"seconds {time.monotonic() - t0:.1f}", flush=True)


def child_sizes(args):
    import nnc
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batched.onnx")
        with open(path, "wb") as f:
            f.write(batched_model())
        m = nnc.compile(path, threads=1, verbose=True)
    rng = np.random.default_rng(0)
    t0 = time.monotonic()
    for n in range(1, args.sizes + 1):
        x = rng.standard_normal((n, 2, 3), dtype=np.float32)
        (y,) = m(x)
        assert y.shape == (n, 2), y.shape
        if n in (16, 50) or n == args.sizes or n % 50 == 0:
            print(f"size {n} {rss_kib()}", flush=True)
    print(f"seconds {time.monotonic() - t0:.1f}", flush=True)


def run_child(kind, args, env):
    cmd = [PYTHON, os.path.abspath(__file__), "--child", kind, "--model", args.model,
           "--runs", str(args.runs), "--sizes", str(args.sizes)]
    rc, out, err = proc.run(cmd, env)
    if rc != 0:
        sys.exit(f"memory_check: {kind} failed:\n{out}{err}")
    return out, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(nnc.MODELS, "mlp_b1"))
    ap.add_argument("--runs", type=int, default=100000)
    ap.add_argument("--sizes", type=int, default=200)
    ap.add_argument("--only", choices=["runs", "sizes"])
    ap.add_argument("--out", default=None, help="also write the report here (FILE.md)")
    ap.add_argument("--child", choices=["runs", "sizes"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "runs":
        return child_runs(args)
    if args.child == "sizes":
        return child_sizes(args)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.abspath(args.build), "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    book = report.Notebook("Bounded memory: RSS over many runs and many batch sizes",
                           os.path.join(args.build, "tools", "nnc", "nnc"), fenced=True)
    print(machine.line(book.mach))
    book.say(f"load average {book.mach['load']}; python {platform.python_version()}")
    if args.only in (None, "runs"):
        out, _ = run_child("runs", args, env)
        rss = {int(a): int(b) for a, b in re.findall(r"^run (\d+) (\d+)$", out, re.M)}
        secs = re.search(r"^seconds (\S+)$", out, re.M).group(1)
        first, last = rss[1000], rss[args.runs]
        book.say(f"runs: {os.path.basename(args.model)}, 1 thread, {args.runs} runs in {secs} s")
        book.say("  RSS (KiB) by run: " + ", ".join(f"{k}: {v}"
                                                   for k, v in sorted(rss.items())))
        book.say(f"  RSS after run 1000: {first} KiB, after run {args.runs}: {last} KiB, "
                 f"change {100.0 * (last - first) / first:+.2f}% (bar: within 1%)")
    if args.only in (None, "sizes"):
        out, err = run_child("sizes", args, env)
        rss = {int(a): int(b) for a, b in re.findall(r"^size (\d+) (\d+)$", out, re.M)}
        secs = re.search(r"^seconds (\S+)$", out, re.M).group(1)
        drops = len(re.findall(r"dropped the least recently used", err))
        book.say(f"sizes: symbolic batch, {args.sizes} distinct batch sizes in {secs} s, "
                 f"{drops} programs dropped (verbose notes; {args.sizes} - 16 expected)")
        book.say("  RSS (KiB) by sizes run: " + ", ".join(f"{k}: {v}"
                                                         for k, v in sorted(rss.items())))
        book.say(f"  RSS after 50 sizes: {rss[50]} KiB, after {args.sizes}: "
                 f"{rss[args.sizes]} KiB, "
                 f"change {100.0 * (rss[args.sizes] - rss[50]) / rss[50]:+.2f}%")

    book.save(args.out)


if __name__ == "__main__":
    main()
