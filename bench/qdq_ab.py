#!/usr/bin/env python3
"""lower-qdq A/B: Q/DQ models (scripts/make_qdq_models.py --size bench) with the standard cpu
pipeline (integer path) against the same pipeline without lower-qdq (f32 between the explicit
Q/DQ ops), one thread, alternating rounds (the order reversed every round). Each round's figure
is `nnc bench`'s median over its iterations; the study's figure is the median over rounds, and
the ratio is taken per round (off / on: above 1, the integer path is faster).

Writes bench/results/qdq.md (and qdq.json, ignored by git) and prints the table.

Usage: bench/qdq_ab.py NNC [--rounds N] [--iterations N] [--models mlp,bert,cnn]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_qdq_models  # noqa: E402


def load():
    return open("/proc/loadavg").read().split()[0]


def bench(nnc, path, passes, iterations):
    r = subprocess.run([nnc, "bench", path, "--threads", "1", "--iterations", str(iterations),
                        "--passes", passes, "--json"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit("nnc bench failed:\n" + r.stdout + r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nnc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--models", default="mlp,bert,cnn")
    a = ap.parse_args()
    load_before = load()
    out = {}
    with tempfile.TemporaryDirectory() as d:
        os.environ["NNC_CACHE_DIR"] = os.path.join(d, "cache")
        make_qdq_models.write_all(d, "bench")
        for m in a.models.split(","):
            path = os.path.join(d, "qdq_%s.onnx" % m)
            on = subprocess.run([a.nnc, "inspect", path, "--print-pipeline"], capture_output=True,
                                text=True).stdout.strip()
            off = re.sub(r"lower-qdq(\{[^}]*\})?,", "", on)
            runs = {"on": [], "off": []}
            for r in range(a.rounds):
                order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
                for k in order:
                    j = bench(a.nnc, path, on if k == "on" else off, a.iterations)
                    runs[k].append((j["median_ms"], j["min_ms"]))
            prof = subprocess.run([a.nnc, "bench", path, "--threads", "1", "--iterations",
                                   str(a.iterations), "--profile"], capture_output=True,
                                  text=True, timeout=900).stdout.splitlines()
            start = next((i for i, l in enumerate(prof) if l.lstrip().startswith("ms ")), 0)
            ratios = [f[0] / n[0] for n, f in zip(runs["on"], runs["off"])]
            out[m] = {"on_median_ms": statistics.median(x[0] for x in runs["on"]),
                      "off_median_ms": statistics.median(x[0] for x in runs["off"]),
                      "on_min_ms": min(x[1] for x in runs["on"]),
                      "off_min_ms": min(x[1] for x in runs["off"]),
                      "ratio_median": statistics.median(ratios), "runs": runs,
                      "profile": prof[start:start + 9]}
    load_after = load()
    sizes = make_qdq_models.SIZES["bench"]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu = [l for l in open("/proc/cpuinfo") if l.startswith("model name")][0].split(":")[1]
    lines = ["# lower-qdq: integer path vs the f32 path between Q/DQ ops", "",
             "Machine: %s, %d cores visible, 1 thread used; nnc %s; %s; load %s before, %s after."
             % (cpu.strip(), os.cpu_count(), commit, time.strftime("%Y-%m-%d %H:%M"),
                load_before, load_after),
             "Command: `bench/qdq_ab.py NNC --rounds %d --iterations %d`; models from "
             "scripts/make_qdq_models.py --size bench (%s)." % (a.rounds, a.iterations, sizes),
             "", "| model | integer path median ms | f32 path median ms | f32/int per-round "
             "median | integer min ms | f32 min ms |", "|---|---|---|---|---|---|"]
    for m, r in out.items():
        lines.append("| %s | %.3f | %.3f | %.2fx | %.3f | %.3f |" % (
            m, r["on_median_ms"], r["off_median_ms"], r["ratio_median"], r["on_min_ms"],
            r["off_min_ms"]))
    lines += ["", "The integer path's kernels (`nnc bench --profile --threads 1`, the heaviest first; "
              "`(integer)` marks an integer GEMM or conv, `(fp32 between Q/DQ: ...)` one that "
              "lower-qdq left in f32 and why):"]
    for m, r in out.items():
        lines += ["", "%s:" % m, "```"] + r["profile"] + ["```"]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "qdq.md"), "w") as f:
        f.write(text)
    with open(os.path.join(HERE, "results", "qdq.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
