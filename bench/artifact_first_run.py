#!/usr/bin/env python3
"""An ahead-of-time artifact run by nnc-exec against ONNX Runtime: first result, peak RSS, latency.

For each model (default: the shared ResNet-18), the artifact is compiled once
(`nnc compile --emit=lib`), then in alternating rounds:
  - nnc-exec: `nnc-exec lib<name>.so --inputs-dir test_data_set_0 --iterations 1 --threads T`,
    its whole-process wall time (process start to first result) and peak RSS;
  - ORT: bench/ort/ort_bench.js with one iteration and no warm-up, as bench/first_run.py runs
    it: its session creation plus that one run (node's own start excluded), and peak RSS.
Then latency: `nnc-exec --iterations K` (median) against `nnc bench --iterations K` (median)
on the same model, threads and machine, in alternating rounds (--latency-rounds); the ratio is
taken per round and its median and range are reported. Reports medians and ratios, and the load average: the
figures are only comparable on a quiet machine.

    python3 bench/artifact_first_run.py [--nnc build/tools/nnc/nnc]
        [--exec build/tools/nnc-exec/nnc-exec] [--threads 1] [--rounds 3] [--iterations 50]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_run import HERE, ROOT, SHARED, timed  # noqa: E402


def ort_first(model, threads):
    inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    out, wall, rss = timed(["node", os.path.join(HERE, "ort", "ort_bench.js"), model, "--threads",
                            str(threads), "--iterations", "1", "--warmup", "0", "--inputs-dir",
                            inputs])
    r = json.loads(out.strip().splitlines()[-1])
    return r["compile_ms"] + r["median_ms"], wall * 1e3, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--exec", dest="exe",
                    default=os.path.join(ROOT, "build", "tools", "nnc-exec", "nnc-exec"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--latency-rounds", type=int, default=5,
                    help="alternating nnc-exec / nnc bench latency pairs")
    ap.add_argument("--models", nargs="*", default=[
        os.path.join(SHARED, "models", "resnet18_b1", "model.onnx")])
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    med = statistics.median
    for model in a.models:
        name = os.path.basename(os.path.dirname(model))
        inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
        with tempfile.TemporaryDirectory(prefix="nnc-artifact-") as d:
            subprocess.run([a.nnc, "compile", model, "-o", d, "--emit=lib"], check=True,
                           stdout=subprocess.DEVNULL)
            lib = os.path.join(d, f"lib{name}.so")
            exe, ort = [], []
            for _ in range(a.rounds):
                _, wall, rss = timed([a.exe, lib, "--inputs-dir", inputs, "--iterations", "1",
                                      "--threads", str(a.threads)])
                exe.append((wall * 1e3, rss))
                ort.append(ort_first(model, a.threads))
            # Latency: alternate the two in each round (which goes first alternates too), so
            # that drift in the machine's load falls on both; the ratio is taken per round.
            def run_exec():
                out, _, _ = timed([a.exe, lib, "--inputs-dir", inputs, "--iterations",
                                   str(a.iterations), "--threads", str(a.threads)])
                return float(re.search(r"median ([0-9.]+) ms", out).group(1))

            def run_bench():
                out, _, _ = timed([a.nnc, "bench", model, "--threads", str(a.threads),
                                   "--iterations", str(a.iterations), "--json"])
                return json.loads(out.strip().splitlines()[-1])["median_ms"]

            pairs = []
            for r in range(a.latency_rounds):
                if r % 2 == 0:
                    e = run_exec()
                    pairs.append((e, run_bench()))
                else:
                    b = run_bench()
                    pairs.append((run_exec(), b))
        e_wall, e_rss = med(r[0] for r in exe), med(r[1] for r in exe)
        o_first, o_wall, o_rss = (med(r[i] for r in ort) for i in range(3))
        print(f"{name}: nnc-exec process to first result {e_wall:.0f} ms, ORT session + one run "
              f"{o_first:.0f} ms (node process {o_wall:.0f} ms): ratio {e_wall / o_first:.2f}")
        print(f"  peak RSS: nnc-exec {e_rss:.0f} MB, ORT {o_rss:.0f} MB: ratio "
              f"{e_rss / o_rss:.2f}")
        ratios = sorted(e / b for e, b in pairs)
        q1, _, q3 = (statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1
                     else (ratios[0],) * 3)
        print(f"  latency (median of {a.iterations} runs, {len(pairs)} alternating rounds): "
              f"nnc-exec {med(p[0] for p in pairs):.2f} ms, nnc bench "
              f"{med(p[1] for p in pairs):.2f} ms: ratio per round median "
              f"{med(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}, range {ratios[0]:.3f}-"
              f"{ratios[-1]:.3f})")
    print(f"load average after: {os.getloadavg()}; threads {a.threads}, {a.rounds} rounds")


if __name__ == "__main__":
    main()
