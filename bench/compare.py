#!/usr/bin/env python3
"""nnc against ONNX Runtime on the six shared benchmark models, measured in one run.

For each model and thread count, `nnc bench --json` and `bench/ort/ort_bench.js` run
alternately (the order flips every round), both on the model's test_data_set_0 input; the
reported latency is the median over rounds of each run's median. Writes
bench/results/compare-<date>.md (table, machine, load, commands) and a .json beside it.

    python3 bench/compare.py [--nnc build/tools/nnc/nnc] [--models DIR] [--threads 1,2]
                             [--rounds 3] [--only mlp_b1,lenet_b1] [--out FILE.md]

Benchmarks are not tests: nothing here is registered in ctest. Setup for the peer:
    cd bench/ort && npm install --ignore-scripts
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODELS = ["mlp_b1", "mlp_b32", "lenet_b1", "lenet_b32", "resnet18_b1", "bert_layer_b1"]

# Timed runs per invocation: enough for a stable median, small enough for a shared 2-core box.
ITERATIONS = {
    "mlp_b1": 300, "mlp_b32": 200, "lenet_b1": 300, "lenet_b32": 100,
    "resnet18_b1": 20, "bert_layer_b1": 20,
}
WARMUP = {
    "mlp_b1": 30, "mlp_b32": 20, "lenet_b1": 30, "lenet_b32": 10,
    "resnet18_b1": 3, "bert_layer_b1": 3,
}


def lscpu():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                info[k.strip()] = v.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def loadavg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_json(cmd, timeout, env=None):
    """Runs cmd; returns (parsed JSON of its last stdout line, None) or (None, error text)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=None if env is None else dict(os.environ, **env))
    except subprocess.TimeoutExpired:
        return None, "timed out after %ds" % timeout
    except OSError as e:
        return None, str(e)
    if p.returncode != 0:
        err = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, "exit %d: %s" % (p.returncode, err[-1] if err else "")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    try:
        return json.loads(lines[-1]), None
    except (IndexError, json.JSONDecodeError):
        return None, "no JSON in output: %r" % p.stdout[-200:]


def fmt_ms(x):
    if x is None:
        return "—"
    return "%.4f" % x if x < 1 else "%.3f" % x if x < 10 else "%.2f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--node", default="node")
    ap.add_argument("--models", default="/work/shared/models")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated model folders")
    ap.add_argument("--iterations", type=int, default=0, help="override per-model iterations")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per invocation")
    ap.add_argument("--ort-spin", choices=["default", "0", "1"], default="default",
                    help="ORT session.intra_op.allow_spinning (default: ORT's own, 1)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    ort_script = os.path.join(HERE, "ort", "ort_bench.js")
    if not os.path.isdir(os.path.join(HERE, "ort", "node_modules", "onnxruntime-node")):
        sys.exit("compare.py: onnxruntime-node not installed; run "
                 "`cd bench/ort && npm install --ignore-scripts`")
    if not os.access(args.nnc, os.X_OK):
        sys.exit("compare.py: nnc not found at %s (pass --nnc)" % args.nnc)

    models = [m for m in (args.only.split(",") if args.only else MODELS) if m]
    threads = [int(t) for t in args.threads.split(",") if t]
    now = datetime.datetime.now(datetime.timezone.utc)
    out_md = args.out or os.path.join(HERE, "results", "compare-%s.md" % now.strftime("%Y-%m-%d"))
    os.makedirs(os.path.dirname(os.path.abspath(out_md)), exist_ok=True)

    cpu = lscpu()
    load_before = loadavg()
    rows = []
    commands = []
    for model in models:
        mdir = os.path.join(args.models, model)
        onnx = os.path.join(mdir, "model.onnx")
        data = os.path.join(mdir, "test_data_set_0")
        iters = args.iterations or ITERATIONS.get(model, 50)
        warm = WARMUP.get(model, 5)
        # Cold compile: nnc once with an empty object cache (NNC_CACHE_DIR), so compile_ms
        # includes LLVM codegen; the timed rounds below then hit the user's warm cache.
        with tempfile.TemporaryDirectory(prefix="nnc-bench-cache-") as cache_dir:
            cold_cmd = [args.nnc, "bench", onnx, "--threads", str(threads[0]), "--iterations",
                        "1", "--warmup", "0", "--inputs-dir", data, "--json"]
            commands.append(["NNC_CACHE_DIR=<empty temp dir>"] + cold_cmd)
            cold, cold_err = run_json(cold_cmd, args.timeout, env={"NNC_CACHE_DIR": cache_dir})
        cold_row = {"compile_ms": cold.get("compile_ms") if cold else None,
                    "kernel_compile_ms": cold.get("kernel_compile_ms") if cold else None,
                    "cache": cold.get("compile_cache") if cold else None, "error": cold_err}
        if cold_err:
            print("  nnc cold compile %s: %s" % (model, cold_err), file=sys.stderr)
        for t in threads:
            common = ["--threads", str(t), "--iterations", str(iters), "--warmup", str(warm)]
            nnc_cmd = [args.nnc, "bench", onnx] + common + ["--inputs-dir", data, "--json"]
            ort_cmd = [args.node, ort_script, onnx] + common + ["--inputs-dir", data]
            if args.ort_spin != "default":
                ort_cmd += ["--spin", args.ort_spin]
            commands += [nnc_cmd, ort_cmd]
            runs = {"nnc": [], "ort": []}
            errors = {"nnc": None, "ort": None}
            for r in range(args.rounds):
                order = [("nnc", nnc_cmd), ("ort", ort_cmd)]
                if r % 2:
                    order.reverse()
                for name, cmd in order:
                    if errors[name]:
                        continue  # a failure is not retried: it is reported
                    res, err = run_json(cmd, args.timeout)
                    if err:
                        errors[name] = err
                        print("  %s %s t=%d: %s" % (name, model, t, err), file=sys.stderr)
                    else:
                        runs[name].append(res)
            med = {k: (statistics.median(x["median_ms"] for x in v) if v else None)
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
            }
            if med["nnc"] and med["ort"]:
                row["ratio"] = med["nnc"] / med["ort"]
            else:
                row["ratio"] = None
            rows.append(row)
            print("%-14s t=%d  nnc %s ms  ort %s ms  ratio %s" % (
                model, t, fmt_ms(med["nnc"]), fmt_ms(med["ort"]),
                "%.2f" % row["ratio"] if row["ratio"] else "—"), flush=True)
    load_after = loadavg()

    ort_version = next((r["ort_version"] for r in rows if r["ort_version"]), "unknown")
    md = []
    md.append("# nnc vs ONNX Runtime — %s" % now.strftime("%Y-%m-%d %H:%M UTC"))
    md.append("")
    md.append("Median latency in ms: each cell is the median of %d per-run medians; nnc and ORT "
              "ran alternately (order flipped each round) in one run of `bench/compare.py`. "
              "Ratio = nnc / ORT (below 1: nnc faster)." % args.rounds)
    md.append("")
    md.append("| model | threads | nnc median ms | ORT median ms | ratio |")
    md.append("|---|---|---|---|---|")
    for r in rows:
        nnc_cell = fmt_ms(r["nnc_median_ms"]) if not r["nnc_error"] or r["nnc_median_ms"] \
            else "failed"
        ort_cell = fmt_ms(r["ort_median_ms"]) if not r["ort_error"] or r["ort_median_ms"] \
            else "failed"
        md.append("| %s | %d | %s | %s | %s |" % (
            r["model"], r["threads"], nnc_cell, ort_cell,
            "%.2f" % r["ratio"] if r["ratio"] else "—"))
    md.append("")
    md.append("Per-round medians (ms), nnc compile time and ORT session creation (ms, every round):")
    md.append("")
    md.append("| model | threads | iters/warmup | nnc rounds | ORT rounds | nnc compile_ms (cache) "
              "| ORT create ms |")
    md.append("|---|---|---|---|---|---|---|")
    for r in rows:
        comp = ", ".join("%s (%s)" % (fmt_ms(c), cc)
                         for c, cc in zip(r["nnc_compile_ms"], r["nnc_compile_cache"]))
        md.append("| %s | %d | %d/%d | %s | %s | %s | %s |" % (
            r["model"], r["threads"], r["iterations"], r["warmup"],
            ", ".join(fmt_ms(x) for x in r["nnc_round_medians"]) or "—",
            ", ".join(fmt_ms(x) for x in r["ort_round_medians"]) or "—",
            comp or "—",
            ", ".join(fmt_ms(x) for x in r["ort_session_create_ms"]) or "—"))
    md.append("")
    md.append("nnc compile time per model with an empty object cache (one run, "
              "NNC_CACHE_DIR set to a fresh directory):")
    md.append("")
    md.append("| model | compile_ms | kernel_compile_ms | cache |")
    md.append("|---|---|---|---|")
    for r in rows:
        if r["threads"] != threads[0]:
            continue
        c = r["nnc_cold_compile"]
        if c["error"]:
            md.append("| %s | failed: `%s` | | |" % (r["model"], c["error"]))
        else:
            md.append("| %s | %s | %s | %s |" % (r["model"], fmt_ms(c["compile_ms"]),
                                                fmt_ms(c["kernel_compile_ms"]), c["cache"]))
    errs = [(r["model"], r["threads"], k, r[k + "_error"]) for r in rows for k in ("nnc", "ort")
            if r[k + "_error"]]
    if errs:
        md.append("")
        md.append("Failures:")
        md.append("")
        for m, t, k, e in errs:
            md.append("- %s %s threads=%d: `%s`" % (k, m, t, e))
    md.append("")
    md.append("Input check: ORT's output on test_data_set_0 against output_0.pb (max abs error): " +
              ", ".join("%s %.1e" % (r["model"], r["ort_max_abs_err_vs_output_0"])
                        for r in rows if r["threads"] == threads[0]
                        and r["ort_max_abs_err_vs_output_0"] is not None) + ".")
    md.append("")
    md.append("## Machine")
    md.append("")
    md.append("- CPU: %s" % cpu.get("Model name", platform.processor() or "unknown"))
    md.append("- CPUs: %s (threads per core %s, cores per socket %s, sockets %s)" % (
        cpu.get("CPU(s)", os.cpu_count()), cpu.get("Thread(s) per core", "?"),
        cpu.get("Core(s) per socket", "?"), cpu.get("Socket(s)", "?")))
    flags = cpu.get("Flags", "").split()
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if f in flags]
    md.append("- ISA: %s" % (" ".join(isa) or "unknown"))
    md.append("- Load average (1/5/15 min) before: %s; after: %s. The machine is shared with "
              "other builds and runs; absolute times are noisy, the ratios (same run, "
              "alternating) are the measurement." % (load_before, load_after))
    nnc_mtime = datetime.datetime.fromtimestamp(os.path.getmtime(args.nnc), datetime.timezone.utc)
    md.append("- nnc: %s (git %s, binary built %s); ONNX Runtime %s (npm onnxruntime-node, "
              "graphOptimizationLevel all, interOpNumThreads 1, sequential, "
              "intra-op allow_spinning %s)" % (
                  os.path.relpath(args.nnc, ROOT), git_rev(),
                  nnc_mtime.strftime("%Y-%m-%d %H:%M UTC"), ort_version,
                  "ORT default (1)" if args.ort_spin == "default" else args.ort_spin))
    md.append("")
    md.append("## Commands")
    md.append("")
    md.append("```")
    md.append(" ".join(shlex.quote(a) for a in
                       ["python3", "bench/compare.py"] + sys.argv[1:]))
    for c in commands:
        md.append(" ".join(a if a.startswith("NNC_CACHE_DIR=") else
                           shlex.quote(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a)
                           for a in c))
    md.append("```")
    md.append("")
    with open(out_md, "w") as f:
        f.write("\n".join(md))
    with open(os.path.splitext(out_md)[0] + ".json", "w") as f:
        json.dump({"date": now.isoformat(), "load_before": load_before,
                   "load_after": load_after, "cpu": cpu.get("Model name"),
                   "rows": rows}, f, indent=1)
    print("wrote %s" % os.path.relpath(out_md, os.getcwd()))


if __name__ == "__main__":
    main()
