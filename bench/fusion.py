#!/usr/bin/env python3
"""What the graph-optimization passes change on the six shared models, measured in one run.

For each model, `nnc bench --json` runs with the default pipeline, with the default pipeline
minus the blocked layout (layout-nchwc), minus the weight packing (pack-gemm-weights), minus
the recognition and fusion passes (`--passes` below), and with no pass at all, alternating
in rounds (the order rotates every round); the reported latency is the median over rounds of
each run's median, with the executable's kernel count. Prints a Markdown table (and the load
average before and after, since the figures are only comparable on a quiet machine).

    python3 bench/fusion.py [--nnc build/tools/nnc/nnc] [--models DIR] [--threads 1]
                            [--rounds 3] [--iterations 20] [--only mlp_b1,bert_layer_b1]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODELS = ["mlp_b1", "mlp_b32", "lenet_b1", "lenet_b32", "resnet18_b1", "bert_layer_b1"]
# The default pipeline (passes/PassRegistry.cpp); the variants drop passes from it.
DEFAULT = ["shape-inference", "constant-fold", "canonicalize", "cse", "shape-inference",
           "constant-fold", "dce", "recognize-layer-norm", "recognize-rms-norm",
           "recognize-softmax", "fold-batch-norm", "dce", "layout-nchwc", "constant-fold", "cse",
           "dce", "winograd", "fuse-elementwise", "fuse-epilogue", "fuse-attention", "pack-gemm-weights",
           "dce"]


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


def bench(nnc, model, passes, threads, iterations):
    cmd = [nnc, "bench", model, "--json", "--threads", str(threads), "--iterations",
           str(iterations), "--warmup", "3"]
    if passes:
        cmd += ["--passes", passes]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    default_models = os.path.join(os.environ.get("NNC_SHARED", os.path.join(ROOT, "..", "shared")),
                                  "models")
    ap.add_argument("--models", default=default_models)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    models = args.only.split(",") if args.only else MODELS
    load_before = os.getloadavg()
    results = {}  # (model, variant) -> list of (median_ms, kernels)
    for r in range(args.rounds):
        for m in models:
            path = os.path.join(args.models, m, "model.onnx")
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for name, passes in order:
                j = bench(args.nnc, path, passes, args.threads, args.iterations)
                results.setdefault((m, name), []).append((j["median_ms"], j.get("kernels", -1)))
    load_after = os.getloadavg()
    print(f"threads {args.threads}, {args.rounds} rounds x {args.iterations} iterations; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after\n")
    head = " | ".join(f"{n} kernels | {n} ms" for n, _ in VARIANTS)
    print(f"| model | {head} |")
    print("|---" * (1 + 2 * len(VARIANTS)) + "|")
    for m in models:
        cells = []
        for name, _ in VARIANTS:
            runs = results[(m, name)]
            cells.append(str(runs[0][1]))
            cells.append(f"{statistics.median(t for t, _ in runs):.3f}")
        print(f"| {m} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
