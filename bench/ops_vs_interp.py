#!/usr/bin/env python3
"""Per-operator latency of the CPU target beside the reference interpreter.

Issue 3 asks that no operator be slower in generated code than in the interpreter. This
benchmark writes one single-op graph per case (text IR, ~1M-element operands), runs
`nnc bench` on it with --target interp and --target cpu alternately in one run, and prints a
table of medians and the interp/cpu ratio (above 1: generated code is faster).

Usage: bench/ops_vs_interp.py [--nnc build/tools/nnc/nnc] [--threads 1] [--iterations 10]
                              [--filter REGEX] [--json OUT]
"""
import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import nnc  # noqa: E402

F = "f32[1000,1000]"


def unary(op, t=F):
    return f"%y = {op}(%x) : {t}", [("x", t)], t


def graph(body, inputs, result):
    """A graph from its body lines; the last line defines %y."""
    ins = ", ".join(f"%{n}: {t}" for n, t in inputs)
    lines = body if isinstance(body, list) else [body]
    text = f"graph @op({ins}) -> ({result}) {{\n"
    text += "".join(f"  {l}\n" for l in lines)
    return text + "  return %y\n}\n"


def k(name, dtype, dims, values):
    vals = ", ".join(str(v) for v in values)
    shape = ",".join(str(d) for d in dims)
    return f"%{name} = constant {{value = dense<{dtype}[{shape}]>[{vals}]}} : {dtype}[{shape}]"


CASES = {
    "add (broadcast row)": (["%y = add(%x, %b) : " + F], [("x", F), ("b", "f32[1000]")], F),
    "exp": unary("exp"),
    "tanh": unary("tanh"),
    "erf": unary("erf"),
    "sigmoid": unary("sigmoid"),
    "cast f32->f16": (["%y = cast(%x) {to = f16} : f16[1000,1000]"], [("x", F)], "f16[1000,1000]"),
    "cast f32->i64": (["%y = cast(%x) {to = i64} : i64[1000,1000]"], [("x", F)], "i64[1000,1000]"),
    "select": (["%y = select(%c, %a, %b) : " + F],
               [("c", "bool[1000,1000]"), ("a", F), ("b", F)], F),
    "reduce_sum axis 1": (["%y = reduce_sum(%x) {axes = [1], keepdims = 0} : f32[1000]"],
                          [("x", F)], "f32[1000]"),
    "reduce_sum axis 0": (["%y = reduce_sum(%x) {axes = [0], keepdims = 0} : f32[1000]"],
                          [("x", F)], "f32[1000]"),
    "reduce_max axis 1": (["%y = reduce_max(%x) {axes = [1], keepdims = 0} : f32[1000]"],
                          [("x", F)], "f32[1000]"),
    "argmax axis 1": (["%y = argmax(%x) {axis = 1, keepdims = 0, select_last_index = 0} : "
                       "i64[1000]"], [("x", F)], "i64[1000]"),
    "argmax axis 0": (["%y = argmax(%x) {axis = 0, keepdims = 0, select_last_index = 0} : "
                       "i64[1000]"], [("x", F)], "i64[1000]"),
    "argmin axis 1 last": (["%y = argmin(%x) {axis = 1, keepdims = 0, select_last_index = 1} "
                            ": i64[1000]"], [("x", F)], "i64[1000]"),
    "cumsum axis 1": (["%y = cumsum(%x) {axis = 1, exclusive = 0, reverse = 0} : " + F],
                      [("x", F)], F),
    "topk k=10 axis 1": ([k("k", "i64", [1], [10]),
                          "%y, %i = topk(%x, %k) {axis = 1, largest = 1, sorted = 1} : "
                          "f32[1000,10], i64[1000,10]"], [("x", F)], "f32[1000,10]"),
    "softmax axis 1": (["%y = softmax(%x) {axis = 1} : " + F], [("x", F)], F),
    "log_softmax axis 0": (["%y = log_softmax(%x) {axis = 0} : " + F], [("x", F)], F),
    "layer_norm": (["%y = layer_norm(%x, %s) {axis = -1, epsilon = 1e-05, stash_type = f32} : "
                    + F], [("x", F), ("s", "f32[1000]")], F),
    "matmul 256x512x256": (["%y = matmul(%a, %b) : f32[256,256]"],
                           [("a", "f32[256,512]"), ("b", "f32[512,256]")], "f32[256,256]"),
    "conv 64->64 3x3 56x56": (["%y = conv(%x, %w) {strides = [1, 1], pads = [1, 1, 1, 1], "
                               "dilations = [1, 1], group = 1} : f32[1,64,56,56]"],
                              [("x", "f32[1,64,56,56]"), ("w", "f32[64,64,3,3]")],
                              "f32[1,64,56,56]"),
    "max_pool 3x3 s2": (["%y = max_pool(%x) {kernel_shape = [3, 3], strides = [2, 2], "
                         "pads = [1, 1, 1, 1], dilations = [1, 1], ceil_mode = 0} : "
                         "f32[1,64,56,56]"], [("x", "f32[1,64,112,112]")], "f32[1,64,56,56]"),
    "avg_pool 2x2 s2": (["%y = avg_pool(%x) {kernel_shape = [2, 2], strides = [2, 2], "
                         "pads = [0, 0, 0, 0], dilations = [1, 1], ceil_mode = 0, "
                         "count_include_pad = 0} : f32[1,64,56,56]"],
                        [("x", "f32[1,64,112,112]")], "f32[1,64,56,56]"),
    "transpose 2-D": (["%y = transpose(%x) {perm = [1, 0]} : " + F], [("x", F)], F),
    "concat axis 1": (["%y = concat(%a, %b) {axis = 1} : " + F],
                      [("a", "f32[1000,500]"), ("b", "f32[1000,500]")], F),
    "gather rows": ([k("i", "i64", [8], [3, 999, 0, 17, 500, 3, -1, 42]),
                     "%y = gather(%x, %i) {axis = 0} : f32[8,1000]"], [("x", F)], "f32[8,1000]"),
    "slice": ([k("s", "i64", [2], [10, 20]), k("e", "i64", [2], [990, 980]),
               "%y = slice(%x, %s, %e, none, none) : f32[980,960]"], [("x", F)], "f32[980,960]"),
    "pad constant": ([k("p", "i64", [4], [1, 2, 3, 4]),
                      "%y = pad(%x, %p) {mode = \"constant\"} : f32[1004,1006]"], [("x", F)],
                     "f32[1004,1006]"),
    "expand": ([k("s", "i64", [2], [1000, 1000]), "%y = expand(%x, %s) : " + F],
               [("x", "f32[1000,1]")], F),
    "nonzero": (["%y = nonzero(%x) : i64[2,K]"], [("x", "bool[1000,1000]")], "i64[2,K]"),
}


def bench(nnc_path, path, target, threads, iterations):
    report, err = nnc.bench(nnc_path, path, threads if target == "cpu" else None, iterations, 2,
                            ["--target", target])
    if err:
        raise RuntimeError(f"nnc bench {path} --target {target}: {err}")
    return report["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--filter", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'op':26} {'interp ms':>10} {'cpu ms':>10} {'interp/cpu':>10}")
        for name, (body, inputs, result) in CASES.items():
            if args.filter and not re.search(args.filter, name):
                continue
            path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".nir")
            with open(path, "w") as f:
                f.write(graph(body, inputs, result))
            interp = bench(args.nnc, path, "interp", args.threads, args.iterations)
            cpu = bench(args.nnc, path, "cpu", args.threads, args.iterations)
            rows.append({"op": name, "interp_ms": interp, "cpu_ms": cpu, "ratio": interp / cpu})
            print(f"{name:26} {interp:10.3f} {cpu:10.3f} {interp / cpu:10.2f}", flush=True)
    slower = [r["op"] for r in rows if r["ratio"] < 1]
    print(f"threads {args.threads}; slower than the interpreter: {', '.join(slower) or 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
