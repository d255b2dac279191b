#!/usr/bin/env python3
"""Time to the first result of `nnc run` against ONNX Runtime's session creation, and peak RSS.

For each model (default: the shared ResNet-18 and BERT layer), in alternating rounds:
  - nnc cold: `nnc run MODEL --inputs-dir test_data_set_0 --threads T` with NNC_CACHE_DIR an
    empty temporary folder (every kernel compiled);
  - nnc warm: the same run again on that folder (every object from the cache);
  - ORT: bench/ort/ort_bench.js with one iteration and no warm-up (its compile_ms is the
    session creation).
Each run is under /usr/bin/time -v for the peak RSS. Reports medians over rounds: nnc's
"compile" (opening the model to an executable, as `nnc run` prints it) and its whole-process
wall time, ORT's session creation and whole-process wall time (node's start included), the
ratios to ORT's session creation and of the peak RSS, and the load average before and after:
the figures are only comparable on a quiet machine.

    python3 bench/first_run.py [--nnc build/tools/nnc/nnc] [--threads 1] [--rounds 3]
                               [--models DIR ...]

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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("NNC_SHARED", os.path.join(ROOT, "..", "shared"))


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time -v: (stdout, wall seconds, peak RSS in MB)."""
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"first_run: {' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return p.stdout, wall, rss / 1024.0


def nnc_run(nnc, model, threads, cache):
    env = dict(os.environ, NNC_CACHE_DIR=cache)
    inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    out, wall, rss = timed([nnc, "run", model, "--inputs-dir", inputs, "--threads", str(threads)],
                           env)
    m = re.search(r"compile ([0-9.]+) ms.*compile cache: (\w+)", out)
    return float(m.group(1)), m.group(2), wall * 1e3, rss


def ort_run(model, threads):
    inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    out, wall, rss = timed(["node", os.path.join(HERE, "ort", "ort_bench.js"), model, "--threads",
                            str(threads), "--iterations", "1", "--warmup", "0", "--inputs-dir",
                            inputs])
    return json.loads(out.strip().splitlines()[-1])["compile_ms"], wall * 1e3, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=[
        os.path.join(SHARED, "models", m, "model.onnx") for m in ("resnet18_b1", "bert_layer_b1")])
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    med = statistics.median
    for model in a.models:
        rows = {"cold": [], "warm": [], "ort": []}
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory(prefix="nnc-first-run-") as cache:
                cold = nnc_run(a.nnc, model, a.threads, cache)
                warm = nnc_run(a.nnc, model, a.threads, cache)
            assert cold[1] == "miss" and warm[1] == "hit", (cold, warm)
            rows["cold"].append(cold)
            rows["warm"].append(warm)
            rows["ort"].append(ort_run(model, a.threads))
        ort_ms = med(r[0] for r in rows["ort"])
        ort_wall = med(r[1] for r in rows["ort"])
        ort_rss = med(r[2] for r in rows["ort"])
        name = os.path.basename(os.path.dirname(model))
        print(f"{name}: ORT session {ort_ms:.0f} ms (process {ort_wall:.0f} ms), "
              f"peak RSS {ort_rss:.0f} MB")
        for kind in ("cold", "warm"):
            c = med(r[0] for r in rows[kind])
            w = med(r[2] for r in rows[kind])
            rss = med(r[3] for r in rows[kind])
            print(f"  nnc {kind}: compile {c:.0f} ms = {c / ort_ms:.1f}x ORT's session, "
                  f"process {w:.0f} ms = {w / ort_wall:.2f}x ORT's process, "
                  f"peak RSS {rss:.0f} MB = {rss / ort_rss:.2f}x")
    print(f"load average after: {os.getloadavg()}; threads {a.threads}, {a.rounds} rounds")


if __name__ == "__main__":
    main()
