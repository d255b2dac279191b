#!/usr/bin/env python3
"""Winograd against the direct conv on the 3x3 stride-1 convs of ResNet-18, layer by layer.

Writes one graph per layer shape (conv 3x3 pad 1 with bias, residual add, relu; random
weights; 56x56x64, 28x28x128, 14x14x256, 7x7x512 at batch 1) and runs each with
`nnc bench --passes`: the default pipeline without the winograd pass (direct conv_nchwc),
with F(4x4) and F(2x2) forced on (balance=0, min-gain=0), and the default (the pass's own choice),
alternating in rounds; reports the median over rounds of each run's median (ms) and the load
average before and after, since the figures are only comparable on a quiet machine.

    python3 bench/winograd.py [--nnc build/tools/nnc/nnc] [--threads 1] [--rounds 3]
                              [--iterations 40]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from fusion import DEFAULT  # noqa: E402  (the default pipeline, kept in one place)

LAYERS = [("layer1", 64, 56), ("layer2", 128, 28), ("layer3", 256, 14), ("layer4", 512, 7)]


def pipeline(winograd):
    return ",".join(winograd if p == "winograd" else p for p in DEFAULT if p != "winograd" or winograd)


VARIANTS = [("direct", pipeline(None)), ("F(4x4)", pipeline("winograd{tile=4,balance=0,min-gain=0}")),
            ("F(2x2)", pipeline("winograd{tile=2,balance=0,min-gain=0}")), ("default", None)]


def layer_graph(name, c, h):
    rnd = random.Random(1)
    hexf = lambda n, s: struct.pack(f"<{n}f", *[rnd.uniform(-s, s) for _ in range(n)]).hex()
    t = f"f32[1,{c},{h},{h}]"
    return f"""graph @{name}(%x: {t}) -> ({t}) {{
  %w = constant {{value = dense<f32[{c},{c},3,3]>hex"{hexf(c * c * 9, 0.05)}"}} : f32[{c},{c},3,3]
  %b = constant {{value = dense<f32[{c}]>hex"{hexf(c, 0.1)}"}} : f32[{c}]
  %zero = constant {{value = dense<f32[]>[0]}} : f32[]
  %y = conv(%x, %w, %b) {{dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]}} : {t}
  %s = add(%y, %x) : {t}
  %r = max(%s, %zero) : {t}
  return %r
}}
"""


def bench(nnc, path, passes, threads, iterations):
    cmd = [nnc, "bench", path, "--threads", str(threads), "--iterations", str(iterations)]
    if passes:
        cmd += ["--passes", passes]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "median" in line:
            return float(line.split("median")[1].split()[0])
    raise RuntimeError(f"no median in: {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=40)
    args = ap.parse_args()
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, c, h in LAYERS:
            paths[name] = os.path.join(d, name + ".nir")
            with open(paths[name], "w") as f:
                f.write(layer_graph(name, c, h))
        for r in range(args.rounds):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for name, _, _ in LAYERS:
                for v, passes in order:
                    results.setdefault((name, v), []).append(
                        bench(args.nnc, paths[name], passes, args.threads, args.iterations))
    load_after = os.getloadavg()
    print(f"threads {args.threads}, {args.rounds} rounds x {args.iterations} iterations; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after\n")
    print("| conv (with add, relu) | " + " | ".join(f"{v} ms" for v, _ in VARIANTS) + " |")
    print("|---" * (1 + len(VARIANTS)) + "|")
    for name, c, h in LAYERS:
        cells = [f"{statistics.median(results[(name, v)]):.3f}" for v, _ in VARIANTS]
        print(f"| {name} {h}x{h}x{c} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
