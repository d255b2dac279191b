#!/usr/bin/env python3
"""Winograd against the direct conv on the 3x3 stride-1 convs of ResNet-18, layer by layer.

Writes one graph per layer shape (conv 3x3 pad 1 with bias, residual add, relu; random
weights; 56x56x64, 28x28x128, 14x14x256, 7x7x512 at batch 1) and runs each with
`nnc bench --passes`: the default pipeline without the winograd pass (direct conv_nchwc),
with F(4x4) and F(2x2) forced on (balance=0, min-gain=0), and the default (the pass's own choice),
alternating in rounds; reports the median over rounds of each run's median (ms) and the load
average before and after, since the figures are only comparable on a quiet machine; with
--out, writes the table there too, under the machine header.

    python3 bench/winograd.py [--nnc build/tools/nnc/nnc] [--threads 1] [--rounds 3]
                              [--iterations 40] [--out FILE.md]

Benchmarks are not tests: nothing here is registered in ctest.
"""

import argparse
import os
import random
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, report  # noqa: E402
from nncbench.nnc import DEFAULT_PIPELINE as DEFAULT  # noqa: E402
from nncbench.stats import median, order  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--out", default=None, help="also write the table here (FILE.md)")
    args = ap.parse_args()
    nnc.require(args.nnc)
    book = report.Notebook("Winograd against the direct conv on ResNet-18's 3x3 convs", args.nnc)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, c, h in LAYERS:
            paths[name] = os.path.join(d, name + ".nir")
            with open(paths[name], "w") as f:
                f.write(layer_graph(name, c, h))
        for r in range(args.rounds):
            for name, _, _ in LAYERS:
                for v, passes in order(VARIANTS, r, rotate=True):
                    j = nnc.bench_or_exit(args.nnc, paths[name], args.threads, args.iterations,
                                          None, ["--passes", passes] if passes else [])
                    results.setdefault((name, v), []).append(j["median_ms"])
    book.say(f"threads {args.threads}, {args.rounds} rounds x {args.iterations} iterations; "
             f"load average {book.mach['load']} before, {machine.load()} after", "")
    book.say(*report.table(["conv (with add, relu)"] + [f"{v} ms" for v, _ in VARIANTS], [
        [f"{name} {h}x{h}x{c}"] + [f"{median(results[(name, v)]):.3f}" for v, _ in VARIANTS]
        for name, c, h in LAYERS]))
    book.save(args.out, {"threads": args.threads, "rounds": args.rounds,
                         "results": {"%s/%s" % k: v for k, v in results.items()}})


if __name__ == "__main__":
    main()
