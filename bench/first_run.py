#!/usr/bin/env python3
"""Time to the first result of `nnc run` against ONNX Runtime's session creation, and peak RSS.

For each model (default: the shared ResNet-18 and BERT layer), in alternating rounds:
  - nnc cold: `nnc run MODEL --inputs-dir test_data_set_0 --threads T` with NNC_CACHE_DIR an
    empty temporary folder (every kernel compiled);
  - nnc warm: the same run again on that folder (every object from the cache);
  - ORT: its peer (nncbench.ort: its own process, bench/ort/ort_bench.js or ort_bench.py)
    with one iteration and no warm-up (its compile_ms is the session creation).
Each run is under /usr/bin/time -v for the peak RSS. Reports medians over rounds: nnc's
"compile" (opening the model to an executable, as `nnc run` prints it) and its whole-process
wall time, ORT's session creation and whole-process wall time (node's start included), the
ratios to ORT's session creation and of the peak RSS, and the load average before and after:
the figures are only comparable on a quiet machine. With --out, writes the report there
too, under the machine header.

    python3 bench/first_run.py [--nnc build/tools/nnc/nnc] [--threads 1] [--rounds 3]
                               [--models DIR ...] [--ort-runner auto|node|python] [--out F.md]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.stats import median as med  # noqa: E402


def nnc_run(nnc_path, model, threads, cache):
    inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    out, wall, rss = proc.timed([nnc_path, "run", model, "--inputs-dir", inputs, "--threads",
                                 str(threads)], {"NNC_CACHE_DIR": cache})
    m = re.search(r"compile ([0-9.]+) ms.*compile cache: (\w+)", out)
    return float(m.group(1)), m.group(2), wall * 1e3, rss


def ort_first(peer, model, threads):
    """ORT's session creation plus one run, in its own process: (session ms, first result ms,
    process wall ms, peak RSS MB)."""
    inputs = os.path.join(os.path.dirname(model), "test_data_set_0")
    out, wall, rss = proc.timed(peer.command(model, threads, 1, 0, inputs_dir=inputs))
    r = proc.json_lines(out)[-1]
    return r["compile_ms"], r["compile_ms"] + r["median_ms"], wall * 1e3, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=[
        os.path.join(nnc.MODELS, m, "model.onnx") for m in ("resnet18_b1", "bert_layer_b1")])
    ort.add_arguments(ap)
    ap.add_argument("--out", default=None, help="also write the report here (FILE.md)")
    a = ap.parse_args()
    nnc.require(a.nnc)
    peer = ort.from_arguments(a)
    if peer.missing():
        sys.exit("first_run.py: " + peer.missing())
    book = report.Notebook("Time to the first result: nnc run against ONNX Runtime", a.nnc,
                           fenced=True)
    book.say(f"load average before: {book.mach['load']}")
    for model in a.models:
        rows = {"cold": [], "warm": [], "ort": []}
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory(prefix="nnc-first-run-") as cache:
                cold = nnc_run(a.nnc, model, a.threads, cache)
                warm = nnc_run(a.nnc, model, a.threads, cache)
            if cold[1] != "miss" or warm[1] != "hit":
                sys.exit(f"first_run: expected a cache miss then a hit, got {cold[1]} then "
                         f"{warm[1]} (NNC_CACHE_DIR={cache})")
            rows["cold"].append(cold)
            rows["warm"].append(warm)
            rows["ort"].append(ort_first(peer, model, a.threads))
        ort_ms = med(r[0] for r in rows["ort"])
        ort_wall = med(r[2] for r in rows["ort"])
        ort_rss = med(r[3] for r in rows["ort"])
        name = os.path.basename(os.path.dirname(model))
        book.say(f"{name}: ORT session {ort_ms:.0f} ms (process {ort_wall:.0f} ms), "
                 f"peak RSS {ort_rss:.0f} MB")
        for kind in ("cold", "warm"):
            c = med(r[0] for r in rows[kind])
            w = med(r[2] for r in rows[kind])
            rss = med(r[3] for r in rows[kind])
            book.say(f"  nnc {kind}: compile {c:.0f} ms = {c / ort_ms:.1f}x ORT's session, "
                     f"process {w:.0f} ms = {w / ort_wall:.2f}x ORT's process, "
                     f"peak RSS {rss:.0f} MB = {rss / ort_rss:.2f}x")
    book.say(f"load average after: {machine.load()}; threads {a.threads}, {a.rounds} rounds")
    book.save(a.out)


if __name__ == "__main__":
    main()
