#!/usr/bin/env python3
"""nnc against ONNX Runtime on the six shared benchmark models, measured in one run.

For each model and thread count, `nnc bench --json` and the ONNX Runtime peer (its own
process, its default spinning pool: nncbench.ort) run alternately (the order flips every
round), both on the model's test_data_set_0 input; the reported latency is the median over
rounds of each run's median. Writes bench/results/compare.md (table, machine, load, commands)
and a .json beside it.

    python3 bench/compare.py [--nnc build/tools/nnc/nnc] [--models DIR] [--threads 1,2]
                             [--rounds 3] [--only mlp_b1,lenet_b1] [--out FILE.md]
                             [--ort-spin default|0|1] [--ort-runner auto|node|python]

Benchmarks are not tests: nothing here is registered in ctest. Setup for the peer:
scripts/setup-bench.sh (or `cd bench/ort && npm install --ignore-scripts`).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, report  # noqa: E402
from nncbench.stats import fmt_ms, median, order  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--node", default="node")
    ap.add_argument("--models", default=nnc.MODELS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated model folders")
    ap.add_argument("--iterations", type=int, default=0, help="override per-model iterations")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per invocation")
    ort.add_arguments(ap)
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    peer = ort.from_arguments(args)
    peer.node = args.node
    if peer.missing():
        sys.exit("compare.py: " + peer.missing())
    nnc.require(args.nnc, hint="pass --nnc")

    models = [m for m in (args.only.split(",") if args.only else nnc.SIX_MODELS) if m]
    threads = [int(t) for t in args.threads.split(",") if t]
    out_md = report.result_path("compare", args.out)
    mach = machine.describe(args.nnc)
    rows = []
    commands = []
    for model in models:
        onnx, data = nnc.model_files(os.path.join(args.models, model))
        iters = args.iterations or nnc.ITERATIONS.get(model, 50)
        warm = nnc.WARMUP.get(model, 5)
        # Cold compile: nnc once with an empty object cache (NNC_CACHE_DIR), so compile_ms
        # includes LLVM codegen; the timed rounds below then hit the user's warm cache.
        with tempfile.TemporaryDirectory(prefix="nnc-bench-cache-") as cache_dir:
            cold_args = (args.nnc, onnx, threads[0], 1, 0, ["--inputs-dir", data])
            commands.append("NNC_CACHE_DIR=<empty temp dir> " +
                            report.command_line(nnc.bench_command(*cold_args)))
            cold, cold_err = nnc.bench(*cold_args, env={"NNC_CACHE_DIR": cache_dir},
                                       timeout=args.timeout)
        cold_row = {"compile_ms": cold.get("compile_ms") if cold else None,
                    "kernel_compile_ms": cold.get("kernel_compile_ms") if cold else None,
                    "cache": cold.get("compile_cache") if cold else None, "error": cold_err}
        if cold_err:
            print("  nnc cold compile %s: %s" % (model, cold_err), file=sys.stderr)
        for t in threads:
            engines = {
                "nnc": lambda: nnc.bench(args.nnc, onnx, t, iters, warm, ["--inputs-dir", data],
                                         timeout=args.timeout),
                "ort": lambda: peer.run(onnx, t, iters, warm, inputs_dir=data,
                                        timeout=args.timeout),
            }
            commands += [nnc.bench_command(args.nnc, onnx, t, iters, warm,
                                           ["--inputs-dir", data]),
                         peer.command(onnx, t, iters, warm, inputs_dir=data)]
            runs = {"nnc": [], "ort": []}
            errors = {"nnc": None, "ort": None}
            for r in range(args.rounds):
                for name in order(engines, r):
                    if errors[name]:
                        continue  # a failure is not retried: it is reported
                    res, err = engines[name]()
                    if err:
                        errors[name] = err
                        print("  %s %s t=%d: %s" % (name, model, t, err), file=sys.stderr)
                    else:
                        runs[name].append(res)
            med = {k: (median(x["median_ms"] for x in v) if v else None)
                   for k, v in runs.items()}
            row = {
                "model": model, "threads": t, "iterations": iters, "warmup": warm,
                "nnc_median_ms": med["nnc"], "ort_median_ms": med["ort"],
                "nnc_round_medians": [x["median_ms"] for x in runs["nnc"]],
                "ort_round_medians": [x["median_ms"] for x in runs["ort"]],
                "nnc_compile_ms": [x.get("compile_ms") for x in runs["nnc"]],
                "nnc_kernel_compile_ms": [x.get("kernel_compile_ms") for x in runs["nnc"]],
                "nnc_compile_cache": [x.get("compile_cache") for x in runs["nnc"]],
                "ort_session_create_ms": [x.get("compile_ms") for x in runs["ort"]],
                "ort_version": runs["ort"][0].get("version") if runs["ort"] else None,
                "ort_max_abs_err_vs_output_0": (runs["ort"][0].get("max_abs_err_vs_output_0")
                                                if runs["ort"] else None),
                "nnc_cold_compile": cold_row,
                "nnc_error": errors["nnc"], "ort_error": errors["ort"],
                "ratio": med["nnc"] / med["ort"] if med["nnc"] and med["ort"] else None,
            }
            rows.append(row)
            print("%-14s t=%d  nnc %s ms  ort %s ms  ratio %s" % (
                model, t, fmt_ms(med["nnc"]), fmt_ms(med["ort"]),
                "%.2f" % row["ratio"] if row["ratio"] else "—"), flush=True)
    load_after = machine.load()

    ort_version = next((r["ort_version"] for r in rows if r["ort_version"]), None)
    md = report.header("nnc vs ONNX Runtime", mach, load_after,
                       ["Peer: %s." % peer.describe(ort_version)])
    md.append("Median latency in ms: each cell is the median of %d per-run medians; nnc and ORT "
              "ran alternately (order flipped each round), each in its own process. "
              "Ratio = nnc / ORT (below 1: nnc faster)." % args.rounds)
    md.append("")

    def cell(r, k):
        return "failed" if r[k + "_error"] and not r[k + "_median_ms"] else fmt_ms(
            r[k + "_median_ms"])
    md += report.table(["model", "threads", "nnc median ms", "ORT median ms", "ratio"], [
        (r["model"], r["threads"], cell(r, "nnc"), cell(r, "ort"),
         "%.2f" % r["ratio"] if r["ratio"] else "—") for r in rows])
    md += ["", "Per-round medians (ms), nnc compile time and ORT session creation (ms, every "
           "round):", ""]
    md += report.table(["model", "threads", "iters/warmup", "nnc rounds", "ORT rounds",
                        "nnc compile_ms (cache)", "ORT create ms"], [
        (r["model"], r["threads"], "%d/%d" % (r["iterations"], r["warmup"]),
         ", ".join(fmt_ms(x) for x in r["nnc_round_medians"]) or "—",
         ", ".join(fmt_ms(x) for x in r["ort_round_medians"]) or "—",
         ", ".join("%s (%s)" % (fmt_ms(c), cc) for c, cc in
                   zip(r["nnc_compile_ms"], r["nnc_compile_cache"])) or "—",
         ", ".join(fmt_ms(x) for x in r["ort_session_create_ms"]) or "—") for r in rows])
    md += ["", "nnc compile time per model with an empty object cache (one run, "
           "NNC_CACHE_DIR set to a fresh directory):", ""]
    cold_rows = []
    for r in rows:
        if r["threads"] != threads[0]:
            continue
        c = r["nnc_cold_compile"]
        cold_rows.append((r["model"], "failed: `%s`" % c["error"], "", "") if c["error"] else (
            r["model"], fmt_ms(c["compile_ms"]), fmt_ms(c["kernel_compile_ms"]), c["cache"]))
    md += report.table(["model", "compile_ms", "kernel_compile_ms", "cache"], cold_rows)
    errs = [(r["model"], r["threads"], k, r[k + "_error"]) for r in rows for k in ("nnc", "ort")
            if r[k + "_error"]]
    if errs:
        md += ["", "Failures:", ""] + ["- %s %s threads=%d: `%s`" % (k, m, t, e)
                                        for m, t, k, e in errs]
    md += ["", "Input check: ORT's output on test_data_set_0 against output_0.pb (max abs "
           "error): " + ", ".join("%s %.1e" % (r["model"], r["ort_max_abs_err_vs_output_0"])
                                  for r in rows if r["threads"] == threads[0]
                                  and r["ort_max_abs_err_vs_output_0"] is not None) + ".", ""]
    md += ["## Commands", ""] + report.commands_block(commands)
    report.write(out_md, md, {"machine": mach, "load_after": load_after, "rows": rows})


if __name__ == "__main__":
    main()
