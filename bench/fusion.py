#!/usr/bin/env python3
"""What the graph-optimization passes change on the six shared models, measured in one run.

For each model, `nnc bench --json` runs with the default pipeline, with the default pipeline
minus the blocked layout (layout-nchwc), minus the weight packing (pack-gemm-weights), minus
the recognition and fusion passes (`--passes` below), and with no pass at all, alternating
in rounds (the order rotates every round); the reported latency is the median over rounds of
each run's median, with the executable's kernel count. Prints a Markdown table (and the load
average before and after, since the figures are only comparable on a quiet machine); with
--out, writes it there too, under the machine header (bench/results/fusion.md is the study's).

    python3 bench/fusion.py [--nnc build/tools/nnc/nnc] [--models DIR] [--threads 1]
                            [--rounds 3] [--iterations 20] [--only mlp_b1,bert_layer_b1]
                            [--out FILE.md]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, report  # noqa: E402
from nncbench.nnc import DEFAULT_PIPELINE as DEFAULT  # noqa: E402
from nncbench.stats import median, order  # noqa: E402


def without(*names):
    """The default pipeline without the passes `names` (layout-nchwc takes the
    constant-fold,cse,dce that follow it along)."""
    out, skip = [], 0
    for p in DEFAULT:
        if skip:
            skip -= 1
            continue
        if p in names:
            skip = 3 if p == "layout-nchwc" else 0
            continue
        out.append(p)
    return ",".join(out)


# Each variant removes one mechanism: the blocked layout, the compile-time weight packing, the
# recognition and fusion passes; "no passes" runs none.
NO_LAYOUT = without("layout-nchwc")
NO_PACKING = without("pack-gemm-weights")
NO_FUSION = without("recognize-layer-norm", "recognize-rms-norm", "recognize-softmax",
                    "fold-batch-norm", "fuse-elementwise", "fuse-epilogue", "fuse-attention")
VARIANTS = [("default", None), ("no layout", NO_LAYOUT), ("no packing", NO_PACKING),
            ("no fusion", NO_FUSION), ("no passes", "none")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--models", default=nnc.MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=None, help="also write the table here (FILE.md)")
    args = ap.parse_args()
    nnc.require(args.nnc)
    book = report.Notebook("Graph passes on the shared models", args.nnc)
    models = args.only.split(",") if args.only else nnc.SIX_MODELS
    results = {}  # (model, variant) -> list of (median_ms, kernels)
    for r in range(args.rounds):
        for m in models:
            path = os.path.join(args.models, m, "model.onnx")
            for name, passes in order(VARIANTS, r, rotate=True):
                j = nnc.bench_or_exit(args.nnc, path, args.threads, args.iterations, 3,
                                      ["--passes", passes] if passes else [])
                results.setdefault((m, name), []).append((j["median_ms"], j.get("kernels", -1)))
    book.say(f"threads {args.threads}, {args.rounds} rounds x {args.iterations} iterations; "
             f"load average {book.mach['load']} before, {machine.load()} after", "")
    rows = []
    for m in models:
        cells = [m]
        for name, _ in VARIANTS:
            runs = results[(m, name)]
            cells += [runs[0][1], f"{median(t for t, _ in runs):.3f}"]
        rows.append(cells)
    book.say(*report.table(["model"] + [c for n, _ in VARIANTS
                                        for c in (f"{n} kernels", f"{n} ms")], rows))
    book.save(args.out, {"rounds": args.rounds, "iterations": args.iterations,
                         "threads": args.threads,
                         "results": {"%s/%s" % k: v for k, v in results.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
