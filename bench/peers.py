#!/usr/bin/env python3
"""nnc against the peers present on this machine, alternating in one run; a table and a plot.

Peers (each skipped, and said so, when absent):
  - ONNX Runtime through its C API: `nnc bench MODEL --compare ort` (libonnxruntime.so loaded
    with dlopen; NNC_ORT_LIBRARY or bench/ort/node_modules), which alternates nnc and ORT
    iteration by iteration in one process on the same input and thread count. Without it,
    bench/ort/ort_bench.js (node + onnxruntime-node) is run beside nnc instead.
  - PyTorch (Debian's python3-torch, /usr/bin/python3): bench/peers_torch.py, eager and
    TorchScript (traced and frozen); the models are make_models.py's own definitions with the
    seed the ONNX files were exported with, checked against each folder's output_0.pb.
  - SGEMM 1024x1024x1024 (the issue's MatMul bar): nnc (a matmul graph), torch.matmul, and the
    SGEMM peer programs of bench/sgemm when built: every executable build/bench/sgemm/* or
    bench/sgemm/*.py is run with `--n 1024 --threads T --json` and is expected to print JSON
    lines with "peer" and "gflops" (or "median_ms").
For every (model, threads) the peers run in rounds, the order flipping every round; each
figure is the median over rounds of each run's median.

    python3 bench/peers.py [--nnc build/tools/nnc/nnc] [--models DIR] [--threads 1,2]
                           [--rounds 3] [--only mlp_b1,lenet_b1] [--no-torch] [--no-sgemm]

Writes bench/results/peers-<date>.md, .json and .png (python3-matplotlib; the plot is skipped,
and said so, without it). Benchmark-only packages: scripts/setup-bench.sh. Not a test.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["mlp_b1", "mlp_b32", "lenet_b1", "lenet_b32", "resnet18_b1", "bert_layer_b1"]
ITERATIONS = {"mlp_b1": 300, "mlp_b32": 200, "lenet_b1": 300, "lenet_b32": 100,
              "resnet18_b1": 20, "bert_layer_b1": 20}
WARMUP = {"mlp_b1": 30, "mlp_b32": 20, "lenet_b1": 30, "lenet_b32": 10,
          "resnet18_b1": 3, "bert_layer_b1": 3}
TORCH_PYTHON = "/usr/bin/python3"


def openblas_coretype():
    """OpenBLAS 0.3.21 (under Debian's torch) misdetects newer CPUs it does not know (issue 7),
    so name its kernel family from the CPU's features, never its model: SkylakeX with
    AVX-512, Haswell with AVX2 + FMA, else OpenBLAS's own detection. (A fixed SkylakeX killed
    every torch peer with SIGILL on an AVX2-only host.)"""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return {"OPENBLAS_CORETYPE": "SkylakeX"}
    if {"avx2", "fma"} <= flags:
        return {"OPENBLAS_CORETYPE": "Haswell"}
    return {}


PEER_ENV = openblas_coretype()


def peer_env(threads):
    """The peers' environment for a thread count: BLAS and OpenMP pools sized like torch's
    own (torch.set_num_threads does not bound OpenBLAS's pool: torch.matmul ran at 336
    GFLOP/s, 1.6 cores' peak, when asked for 1 thread)."""
    e = dict(PEER_ENV)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        e[v] = str(threads)
    return e


def run(cmd, env=None, timeout=1800):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def sgemm_programs():
    progs = []
    for pattern in (os.path.join(ROOT, "build", "bench", "sgemm", "*"),
                    os.path.join(HERE, "sgemm", "*.py")):
        for p in sorted(glob.glob(pattern)):
            if os.path.isfile(p) and (p.endswith(".py") or os.access(p, os.X_OK)):
                progs.append(p)
    return progs


def matmul_graph(n):
    t = "f32[%d,%d]" % (n, n)
    return ("graph @sgemm(%%a: %s, %%b: %s) -> (%s) {\n  %%c = matmul(%%a, %%b) : %s\n"
            "  return %%c\n}\n" % (t, t, t, t))


def plot(stem, models, threads, rows, peers, date):
    """stem.png: per thread count, each model's latency per peer relative to nnc's."""
    try:
        import matplotlib
    except ImportError:
        # The pyenv/venv python may lack it while Debian's has it (python3-matplotlib).
        if sys.executable != TORCH_PYTHON and os.access(TORCH_PYTHON, os.X_OK):
            rc = subprocess.run([TORCH_PYTHON, os.path.abspath(__file__), "--plot-only",
                                 stem + ".json"]).returncode
            if rc == 0:
                return
        print("plot skipped: matplotlib is not installed (scripts/setup-bench.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5),
                             squeeze=False)
    names = [m for m in models]
    allp = ["nnc"] + peers
    width = 0.8 / max(1, len(allp))
    for ax, t in zip(axes[0], threads):
        for j, p in enumerate(allp):
            ys = []
            for name in names:
                r = next((r for r in rows if r["model"] == name and r["threads"] == t), None)
                m = r["median_ms"] if r else {}
                ys.append(m[p] / m["nnc"] if p in m and "nnc" in m else 0)
            ax.bar([i + j * width for i in range(len(names))], ys, width, label=p)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([i + width * (len(allp) - 1) / 2 for i in range(len(names))])
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_ylabel("latency / nnc's (above 1: nnc faster)")
        ax.set_title("%d thread%s" % (t, "" if t == 1 else "s"))
        ax.legend(fontsize=8)
    fig.suptitle("nnc vs peers, median latency (%s)" % date)
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=100)
    print("wrote %s.png" % stem)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--models", default=os.environ.get(
        "NNC_SHARED", "/work/shared") + "/models")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-sgemm", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the iteration counts")
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot-only", default=None, help="redraw the .png of a results .json")
    args = ap.parse_args()
    if args.plot_only:
        d = json.load(open(args.plot_only))
        rows = d["models"]
        models = list(dict.fromkeys(r["model"] for r in rows))
        threads = sorted({r["threads"] for r in rows})
        peers = sorted({k for r in rows for k in r["median_ms"]} - {"nnc"})
        plot(os.path.splitext(args.plot_only)[0], models, threads, rows, peers,
             d["meta"]["date"])
        return
    if not os.access(args.nnc, os.X_OK):
        sys.exit("not built: %s" % args.nnc)
    models = args.only.split(",") if args.only else MODELS
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get(
        "NNC_CACHE_DIR", os.path.join(tempfile.gettempdir(), "nnc-cache-bench"))}
    notes = []

    # Which peers are here.
    probe_model = os.path.join(args.models, models[0], "model.onnx")
    rc, out, err = run([args.nnc, "bench", probe_model, "--iterations", "1", "--warmup", "0",
                        "--threads", "1", "--json", "--compare", "ort"], env)
    ort_capi = rc == 0
    ort_js = None
    if not ort_capi:
        notes.append("ONNX Runtime C API: not available (%s)" % err.strip().splitlines()[0])
        js = os.path.join(HERE, "ort", "ort_bench.js")
        if shutil.which("node") and os.path.isdir(os.path.join(HERE, "ort", "node_modules")):
            ort_js = js
            notes.append("ONNX Runtime: through bench/ort/ort_bench.js instead")
    else:
        r = json_lines(out)[0]
        notes.append("ONNX Runtime %s through its C API (nnc bench --compare ort)" %
                     r["ort_version"])
    have_torch = not args.no_torch and os.access(TORCH_PYTHON, os.X_OK) and run(
        [TORCH_PYTHON, "-c", "import torch"])[0] == 0
    if not have_torch:
        notes.append("PyTorch: skipped (%s)" % ("--no-torch" if args.no_torch else
                                                "python3-torch not importable"))
    sgemm = [] if args.no_sgemm else sgemm_programs()
    if not args.no_sgemm and not sgemm:
        notes.append("SGEMM peer programs: none built under build/bench/sgemm or bench/sgemm")

    load_before = os.getloadavg()
    rows = []
    commands = {}
    for name in models:
        mdir = os.path.join(args.models, name)
        onnx = os.path.join(mdir, "model.onnx")
        inputs = os.path.join(mdir, "test_data_set_0")
        its = max(3, int(ITERATIONS.get(name, 20) * args.scale))
        wu = max(1, int(WARMUP.get(name, 3) * args.scale))
        for t in threads:
            cmds = {}
            nnc_cmd = [args.nnc, "bench", onnx, "--inputs-dir", inputs, "--threads", str(t),
                       "--iterations", str(its), "--warmup", str(wu), "--json"]
            cmds["nnc"] = nnc_cmd + (["--compare", "ort"] if ort_capi else [])
            if ort_js:
                cmds["ort"] = ["node", ort_js, onnx, "--inputs-dir", inputs, "--threads",
                               str(t), "--iterations", str(its), "--warmup", str(wu)]
            if have_torch:
                for mode in ("eager", "script"):
                    cmds["torch-" + mode] = [
                        TORCH_PYTHON, os.path.join(HERE, "peers_torch.py"), mdir, "--threads",
                        str(t), "--iterations", str(its), "--warmup", str(wu), "--mode", mode]
            commands["%s/%d" % (name, t)] = cmds
            medians = {}
            diffs = {}
            for r in range(args.rounds):
                order = list(cmds)
                if r % 2:
                    order.reverse()
                for who in order:
                    rc, out, err = run(cmds[who], peer_env(t) if who != "nnc" else env)
                    res = json_lines(out)
                    if rc != 0 or not res:
                        notes.append("%s %s/%d failed: %s" % (who, name, t,
                                                              (err.strip() or out)[-300:]))
                        continue
                    res = res[0]
                    medians.setdefault(who, []).append(res["median_ms"])
                    if who == "nnc" and "ort_median_ms" in res:
                        medians.setdefault("ort", []).append(res["ort_median_ms"])
                        diffs["ort"] = res.get("ort_max_abs_diff")
                    if "max_abs_diff" in res:
                        diffs[who] = res["max_abs_diff"]
            row = {"model": name, "threads": t,
                   "median_ms": {k: statistics.median(v) for k, v in medians.items()},
                   "run_medians_ms": medians, "max_abs_diff": diffs}
            rows.append(row)
            m = row["median_ms"]
            print("%-14s %d thr: %s" % (name, t, ", ".join(
                "%s %.4f" % (k, v) for k, v in sorted(m.items()))), flush=True)

    # SGEMM 1024^3: nnc's matmul, torch.matmul, the bench/sgemm programs.
    gemm = []
    if not args.no_sgemm:
        n = 1024
        tmp = tempfile.mkdtemp(prefix="nnc-peers-")
        g = os.path.join(tmp, "sgemm.nir")
        with open(g, "w") as f:
            f.write(matmul_graph(n))
        for t in threads:
            cmds = {"nnc": [args.nnc, "bench", g, "--threads", str(t), "--iterations", "10",
                            "--warmup", "2", "--json"]}
            if have_torch:
                cmds["torch"] = [TORCH_PYTHON, os.path.join(HERE, "peers_torch.py"), "--matmul",
                                 str(n), "--threads", str(t), "--iterations", "10"]
            for p in sgemm:
                base = [sys.executable, p] if p.endswith(".py") else [p]
                cmds[os.path.basename(p)] = base + ["--n", str(n), "--threads", str(t), "--json"]
            commands["sgemm%d/%d" % (n, t)] = cmds
            rates = {}
            for r in range(args.rounds):
                order = list(cmds) if r % 2 == 0 else list(reversed(list(cmds)))
                for who in order:
                    rc, out, err = run(cmds[who], peer_env(t) if who != "nnc" else env)
                    if rc != 0:
                        notes.append("sgemm %s/%d failed: %s" % (who, t, err.strip()[-300:]))
                        continue
                    for res in json_lines(out):
                        # bench/sgemm/nnc-sgemm-bench: one line with "<peer>_gflops" fields.
                        for field, value in res.items():
                            if field.endswith("_gflops") and isinstance(value, (int, float)):
                                rates.setdefault("%s (%s)" % (field[:-len("_gflops")], who),
                                                 []).append(value)
                        key = who if who in ("nnc", "torch") else res.get("peer", who)
                        gf = res.get("gflops")
                        if gf is None and "median_ms" in res:
                            gf = 2 * n ** 3 / (res["median_ms"] * 1e-3) / 1e9
                        if gf is not None:
                            rates.setdefault(key, []).append(gf)
            row = {"n": n, "threads": t, "gflops": {k: statistics.median(v)
                                                    for k, v in rates.items()}}
            gemm.append(row)
            print("sgemm %d %d thr: %s" % (n, t, ", ".join(
                "%s %.1f GFLOP/s" % (k, v) for k, v in sorted(row["gflops"].items()))),
                flush=True)
    load_after = os.getloadavg()

    date = datetime.date.today().isoformat()
    out_md = args.out or os.path.join(HERE, "results", "peers-%s.md" % date)
    os.makedirs(os.path.dirname(out_md), exist_ok=True)
    stem = os.path.splitext(out_md)[0]
    meta = {"date": date, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "rounds": args.rounds, "load_before": load_before,
            "load_after": load_after, "notes": notes, "commands": commands}
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "models": rows, "sgemm": gemm}, f, indent=1)

    peers = sorted({k for r in rows for k in r["median_ms"]} - {"nnc"})
    with open(out_md, "w") as f:
        f.write("# nnc vs peers (%s)\n\n" % date)
        f.write("Median latency in ms (median over %d alternating rounds of each run's "
                "median); ratio = nnc / peer (below 1: nnc faster). Load average before %s, "
                "after %s; %d CPUs.\n\n" % (
                    args.rounds, "/".join("%.2f" % x for x in load_before),
                    "/".join("%.2f" % x for x in load_after), os.cpu_count()))
        for note in notes:
            f.write("- %s\n" % note)
        f.write("\n| model | threads | nnc | %s |\n" % " | ".join(
            "%s | nnc/%s" % (p, p) for p in peers))
        f.write("|---|---|---|%s\n" % ("---|---|" * len(peers)))
        for r in rows:
            m = r["median_ms"]
            cells = []
            for p in peers:
                if p in m and "nnc" in m:
                    cells.append("%.4g | %.2f" % (m[p], m["nnc"] / m[p]))
                else:
                    cells.append("- | -")
            f.write("| %s | %d | %s | %s |\n" % (r["model"], r["threads"],
                                                 "%.4g" % m["nnc"] if "nnc" in m else "-",
                                                 " | ".join(cells)))
        if gemm:
            f.write("\nSGEMM %dx%dx%d, GFLOP/s (median of rounds):\n\n" % (1024, 1024, 1024))
            names = sorted({k for r in gemm for k in r["gflops"]})
            f.write("| threads | %s |\n|---|%s\n" % (" | ".join(names), "---|" * len(names)))
            for r in gemm:
                f.write("| %d | %s |\n" % (r["threads"], " | ".join(
                    "%.1f" % r["gflops"][k] if k in r["gflops"] else "-" for k in names)))
        f.write("\nCommands (per round; the order flips every round):\n\n")
        for key, cmds in commands.items():
            for who, c in cmds.items():
                f.write("    [%s %s] %s\n" % (key, who, " ".join(c)))

    plot(stem, models, threads, rows, peers, date)
    print("wrote %s and %s.json" % (out_md, stem))


if __name__ == "__main__":
    main()
