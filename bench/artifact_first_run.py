#!/usr/bin/env python3
"""An ahead-of-time artifact run by nnc-exec against ONNX Runtime: first result, peak RSS, latency.

For each model (default: the shared ResNet-18), the artifact is compiled once
(`nnc compile --emit=lib`), then in alternating rounds:
  - nnc-exec: `nnc-exec lib<name>.so --inputs-dir test_data_set_0 --iterations 1 --threads T`,
    its whole-process wall time (process start to first result) and peak RSS;
  - ORT: its peer (nncbench.ort, its own process) with one iteration and no warm-up, as
    bench/first_run.py runs it: its session creation plus that one run (the interpreter's
    own start excluded), and peak RSS.
Then latency: `nnc-exec --iterations K` (median) against `nnc bench --iterations K` (median)
on the same model, threads and machine, in alternating rounds (--latency-rounds); the ratio is
taken per round and its median and range are reported. Reports medians and ratios, and the
load average: the figures are only comparable on a quiet machine. With --out, writes the report
there too, under the machine header (bench/results/artifact-latency.md is the study's).

    python3 bench/artifact_first_run.py [--nnc build/tools/nnc/nnc]
        [--exec build/tools/nnc-exec/nnc-exec] [--threads 1] [--rounds 3] [--iterations 50]
        [--latency-rounds 5] [--models MODEL.onnx ...] [--out FILE.md]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_run import ort_first  # noqa: E402
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.stats import median as med, order, ratios  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--exec", dest="exe", default=nnc.NNC_EXEC)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--latency-rounds", type=int, default=5,
                    help="alternating nnc-exec / nnc bench latency pairs")
    ap.add_argument("--models", nargs="*", default=[
        os.path.join(nnc.MODELS, "resnet18_b1", "model.onnx")])
    ort.add_arguments(ap)
    ap.add_argument("--out", default=None, help="also write the report here (FILE.md)")
    a = ap.parse_args()
    nnc.require(a.nnc)
    nnc.require(a.exe, "nnc-exec")
    peer = ort.from_arguments(a)
    if peer.missing():
        sys.exit("artifact_first_run.py: " + peer.missing())
    book = report.Notebook("nnc-exec (ahead-of-time artifact) against ONNX Runtime and nnc "
                           "bench", a.nnc, fenced=True)
    book.say(f"load average before: {book.mach['load']}")
    for model in a.models:
        name = os.path.basename(os.path.dirname(model))
        inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
        with tempfile.TemporaryDirectory(prefix="nnc-artifact-") as d:
            subprocess.run([a.nnc, "compile", model, "-o", d, "--emit=lib"], check=True,
                           stdout=subprocess.DEVNULL)
            lib = os.path.join(d, f"lib{name}.so")
            exe, first = [], []
            for _ in range(a.rounds):
                _, wall, rss = proc.timed([a.exe, lib, "--inputs-dir", inputs, "--iterations",
                                           "1", "--threads", str(a.threads)])
                exe.append((wall * 1e3, rss))
                first.append(ort_first(peer, model, a.threads)[1:])
            # Latency: alternate the two in each round (which goes first alternates too), so
            # that drift in the machine's load falls on both; the ratio is taken per round.
            def run_exec():
                out, _, _ = proc.timed([a.exe, lib, "--inputs-dir", inputs, "--iterations",
                                        str(a.iterations), "--threads", str(a.threads)])
                return float(re.search(r"median ([0-9.]+) ms", out).group(1))

            def run_bench():
                return nnc.bench_or_exit(a.nnc, model, a.threads, a.iterations)["median_ms"]

            pairs = []
            for r in range(a.latency_rounds):
                got = {who: fn() for who, fn in order([("exec", run_exec),
                                                       ("bench", run_bench)], r)}
                pairs.append((got["exec"], got["bench"]))
        e_wall, e_rss = med(r[0] for r in exe), med(r[1] for r in exe)
        o_first, o_wall, o_rss = (med(r[i] for r in first) for i in range(3))
        book.say(f"{name}: nnc-exec process to first result {e_wall:.0f} ms, ORT session + one "
                 f"run {o_first:.0f} ms (its process {o_wall:.0f} ms): ratio "
                 f"{e_wall / o_first:.2f}",
                 f"  peak RSS: nnc-exec {e_rss:.0f} MB, ORT {o_rss:.0f} MB: ratio "
                 f"{e_rss / o_rss:.2f}")
        s = ratios(pairs)
        book.say(f"  latency (median of {a.iterations} runs, {len(pairs)} alternating rounds): "
                 f"nnc-exec {med(p[0] for p in pairs):.2f} ms, nnc bench "
                 f"{med(p[1] for p in pairs):.2f} ms: ratio per round median "
                 f"{s['median']:.3f} (quartiles {s['q1']:.3f}-{s['q3']:.3f}, range "
                 f"{s['min']:.3f}-{s['max']:.3f})")
    book.say(f"load average after: {machine.load()}; threads {a.threads}, {a.rounds} rounds")
    book.save(a.out)


if __name__ == "__main__":
    main()
