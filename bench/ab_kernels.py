#!/usr/bin/env python3
"""Two nnc builds (or two settings of one) on one model, kernel by kernel, on a noisy host.

Each round runs `nnc bench MODEL --profile --json` once per case, the cases' order flipping
every round: on a shared host the case that runs first in a round can come out slower
whichever build it is (2-core EPYC, session 16: the same build twice, 130.5 against 125.2 ms),
so a fixed order biases every comparison. Per kernel it keeps the minimum over rounds of the
profile's per-kernel mean, then prints both cases' sums and the kernels that moved most.
A case is NAME=NNC_BINARY, optionally with environment settings after it:

    python3 bench/ab_kernels.py MODEL old=/path/to/old/nnc new=build/tools/nnc/nnc \\
        [--rounds 6] [--iterations 10] [--threads 1] [--top 8] [--input NAME=FILE.npy ...]
    python3 bench/ab_kernels.py MODEL base=build/tools/nnc/nnc \\
        tuned=build/tools/nnc/nnc,NNC_TUNING_CACHE=/tmp/forced.db

A benchmark, not a test: it reports figures and asserts nothing. Kernels are matched by
name, so both cases must lower the model to the same kernels for the per-kernel lines (the
sums hold regardless).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import nnc, proc  # noqa: E402
from nncbench.stats import order  # noqa: E402


def parse_case(text):
    name, _, rest = text.partition("=")
    if not name or not rest:
        sys.exit(f"ab_kernels: a case is NAME=NNC_BINARY[,VAR=VALUE...], got {text!r}")
    binary, *settings = rest.split(",")
    env = dict(os.environ)
    for s in settings:
        var, eq, value = s.partition("=")
        if not eq:
            sys.exit(f"ab_kernels: {s!r} in case {name!r} is not VAR=VALUE")
        env[var] = value
    return name, binary, env


def profile(binary, env, args):
    extra = ["--profile"] + [a for i in args.input for a in ("--input", i)]
    cmd = nnc.bench_command(binary, args.model, args.threads, args.iterations, None, extra)
    report, err = proc.run_json(cmd, env)
    if err:
        sys.exit(f"ab_kernels: {' '.join(cmd)} failed:\n{err}")
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("cases", nargs="+", help="NAME=NNC_BINARY[,VAR=VALUE...]")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=8, help="kernels shown each way")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE, as nnc bench")
    ap.add_argument("--kind", action="append", default=[],
                    help="also sum the minima of the kernels whose name contains this "
                         "(winograd_input, matmul); repeatable")
    args = ap.parse_args()
    cases = [parse_case(c) for c in args.cases]
    if len({c[0] for c in cases}) != len(cases):
        sys.exit("ab_kernels: case names must differ")

    best = {name: {} for name, _, _ in cases}  # case -> kernel -> min over rounds (ms)
    medians = {name: [] for name, _, _ in cases}
    for r in range(args.rounds):
        for name, binary, env in order(cases, r):
            d = profile(binary, env, args)
            medians[name].append(d["median_ms"])
            for k in d["profile"]["kernels"]:
                b = best[name]
                b[k["name"]] = min(b.get(k["name"], float("inf")), k["ms"])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"{args.model}: {args.rounds} rounds x {args.iterations} iterations, "
          f"{args.threads} thread(s), order flipping each round")
    for name, _, _ in cases:
        ms = sorted(medians[name])
        print(f"  {name:12s} sum of per-kernel minima {sum(best[name].values()):10.3f} ms   "
              f"run medians {ms[0]:.3f} .. {ms[-1]:.3f} ms")
        for kind in args.kind:
            kernels = [v for k, v in best[name].items() if kind in k]
            print(f"  {name:12s}   {kind}: {len(kernels)} kernels, {sum(kernels):.3f} ms")
    if len(cases) == 2:
        a, b = cases[0][0], cases[1][0]
        common = sorted(set(best[a]) & set(best[b]))
        moved = sorted((best[b][k] - best[a][k], k) for k in common)
        print(f"  kernels {a} -> {b} (ms), most improved and most regressed:")
        shown = moved if len(moved) <= 2 * args.top else (
            moved[:args.top] + [None] + moved[-args.top:])
        for m in shown:
            if m is None:
                print("    ...")
            else:
                print(f"    {m[0]:+8.3f}  {m[1]}  {best[a][m[1]]:.3f} -> {best[b][m[1]]:.3f}")
        only = sorted(set(best[a]) ^ set(best[b]))
        if only:
            print(f"  kernels in one case only: {len(only)} (the two lower differently)")


if __name__ == "__main__":
    main()
