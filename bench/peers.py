#!/usr/bin/env python3
"""nnc against the peers present on this machine, alternating in one run; a table and a plot.

Peers (each skipped, and said so, when absent):
  - ONNX Runtime, in its own process with its default spinning pool (nncbench.ort:
    bench/ort/ort_bench.js through node, or bench/ort/ort_bench.py through Python's
    onnxruntime), on the same input and thread count.
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
                           [--no-ort] [--ort-spin default|0|1] [--out FILE.md]

Writes bench/results/peers.md, .json and .png (python3-matplotlib; the plot is skipped,
and said so, without it). Benchmark-only packages: scripts/setup-bench.sh. Not a test.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.nnc import BENCH as HERE, ROOT  # noqa: E402
from nncbench.stats import median, order  # noqa: E402

TORCH_PYTHON = "/usr/bin/python3"


def openblas_coretype():
    """OpenBLAS 0.3.21 (under Debian's torch) misdetects newer CPUs it does not know (issue 7),
    so name its kernel family from the CPU's features, never its model: SkylakeX with
    AVX-512, Haswell with AVX2 + FMA, else OpenBLAS's own detection. (A fixed SkylakeX killed
    every torch peer with SIGILL on an AVX2-only host.)"""
    flags = machine.cpuinfo()[1]
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


def sgemm_programs():
    progs = []
    for pattern in (os.path.join(ROOT, "build", "bench", "sgemm", "*"),
                    os.path.join(HERE, "sgemm", "*.py")):
        for p in sorted(glob.glob(pattern)):
            if os.path.isfile(p) and (p.endswith(".py") or os.access(p, os.X_OK)):
                progs.append(p)
    return progs


def plot(stem, models, threads, rows, peers, date):
    """stem.png: per thread count, each model's latency per peer relative to nnc's."""
    def rel(name, t, p):
        m = next((r["median_ms"] for r in rows if r["model"] == name and r["threads"] == t), {})
        return m[p] / m["nnc"] if p in m and "nnc" in m else 0
    panels = [("%d thread%s" % (t, "" if t == 1 else "s"),
               {p: [rel(n, t, p) for n in models] for p in ["nnc"] + peers}) for t in threads]
    # The pyenv/venv python may lack matplotlib while Debian's has it (python3-matplotlib):
    # then Debian's draws it, and says so if it cannot either.
    retry = sys.executable != TORCH_PYTHON and os.access(TORCH_PYTHON, os.X_OK)
    if not report.bar_plot(stem + ".png", models, panels, "latency / nnc's (above 1: nnc "
                           "faster)", "nnc vs peers, median latency (%s)" % date, quiet=retry) \
            and retry:
        subprocess.run([TORCH_PYTHON, os.path.abspath(__file__), "--plot-only", stem + ".json"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--models", default=nnc.MODELS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-sgemm", action="store_true")
    ap.add_argument("--no-ort", action="store_true")
    ort.add_arguments(ap)
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
             d["machine"]["date"])
        return
    nnc.require(args.nnc)
    models = args.only.split(",") if args.only else nnc.SIX_MODELS
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get(
        "NNC_CACHE_DIR", os.path.join(tempfile.gettempdir(), "nnc-cache-bench"))}
    notes = []

    # Which peers are here.
    ort_peer = None if args.no_ort else ort.from_arguments(args)
    if ort_peer and ort_peer.missing():
        notes.append("ONNX Runtime: skipped (%s)" % ort_peer.missing())
        ort_peer = None
    elif not ort_peer:
        notes.append("ONNX Runtime: skipped (--no-ort)")
    have_torch = not args.no_torch and os.access(TORCH_PYTHON, os.X_OK) and proc.run(
        [TORCH_PYTHON, "-c", "import torch"])[0] == 0
    if not have_torch:
        notes.append("PyTorch: skipped (%s)" % ("--no-torch" if args.no_torch else
                                                "python3-torch not importable"))
    sgemm = [] if args.no_sgemm else sgemm_programs()
    if not args.no_sgemm and not sgemm:
        notes.append("SGEMM peer programs: none built under build/bench/sgemm or bench/sgemm")

    mach = machine.describe(args.nnc)
    ort_version = None
    rows = []
    commands = {}
    for name in models:
        mdir = os.path.join(args.models, name)
        onnx, inputs = nnc.model_files(mdir)
        its = max(3, int(nnc.ITERATIONS.get(name, 20) * args.scale))
        wu = max(1, int(nnc.WARMUP.get(name, 3) * args.scale))
        for t in threads:
            cmds = {"nnc": nnc.bench_command(args.nnc, onnx, t, its, wu,
                                             ["--inputs-dir", inputs])}
            if ort_peer:
                cmds["ort"] = ort_peer.command(onnx, t, its, wu, inputs_dir=inputs)
            if have_torch:
                for mode in ("eager", "script"):
                    cmds["torch-" + mode] = [
                        TORCH_PYTHON, os.path.join(HERE, "peers_torch.py"), mdir, "--threads",
                        str(t), "--iterations", str(its), "--warmup", str(wu), "--mode", mode]
            commands["%s/%d" % (name, t)] = cmds
            medians = {}
            diffs = {}
            for r in range(args.rounds):
                for who in order(cmds, r):
                    res, err = proc.run_json(cmds[who], peer_env(t) if who != "nnc" else env,
                                             timeout=1800)
                    if err:
                        notes.append("%s %s/%d failed: %s" % (who, name, t, err[-300:]))
                        continue
                    medians.setdefault(who, []).append(res["median_ms"])
                    if who == "ort":
                        ort_version = res.get("version")
                        diffs["ort"] = res.get("max_abs_err_vs_output_0")
                    if "max_abs_diff" in res:
                        diffs[who] = res["max_abs_diff"]
            row = {"model": name, "threads": t,
                   "median_ms": {k: median(v) for k, v in medians.items()},
                   "run_medians_ms": medians, "max_abs_diff": diffs}
            rows.append(row)
            m = row["median_ms"]
            print("%-14s %d thr: %s" % (name, t, ", ".join(
                "%s %.4f" % (k, v) for k, v in sorted(m.items()))), flush=True)
    if ort_version:
        notes.append(ort_peer.describe(ort_version))

    # SGEMM 1024^3: nnc's matmul, torch.matmul, the bench/sgemm programs.
    gemm = []
    if not args.no_sgemm:
        n = 1024
        tmp = tempfile.mkdtemp(prefix="nnc-peers-")
        g = os.path.join(tmp, "sgemm.nir")
        with open(g, "w") as f:
            f.write(nnc.matmul_graph(n))
        for t in threads:
            cmds = {"nnc": nnc.bench_command(args.nnc, g, t, 10, 2)}
            if have_torch:
                cmds["torch"] = [TORCH_PYTHON, os.path.join(HERE, "peers_torch.py"), "--matmul",
                                 str(n), "--threads", str(t), "--iterations", "10"]
            for p in sgemm:
                base = [sys.executable, p] if p.endswith(".py") else [p]
                cmds[os.path.basename(p)] = base + ["--n", str(n), "--threads", str(t), "--json"]
            commands["sgemm%d/%d" % (n, t)] = cmds
            rates = {}
            for r in range(args.rounds):
                for who in order(cmds, r):
                    rc, out, err = proc.run(cmds[who], peer_env(t) if who != "nnc" else env,
                                            timeout=1800)
                    if rc != 0:
                        notes.append("sgemm %s/%d failed: %s" % (who, t, err.strip()[-300:]))
                        continue
                    for res in proc.json_lines(out):
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
            row = {"n": n, "threads": t, "gflops": {k: median(v) for k, v in rates.items()}}
            gemm.append(row)
            print("sgemm %d %d thr: %s" % (n, t, ", ".join(
                "%s %.1f GFLOP/s" % (k, v) for k, v in sorted(row["gflops"].items()))),
                flush=True)
    load_after = machine.load()

    out_md = report.result_path("peers", args.out)
    stem = os.path.splitext(out_md)[0]
    peers = sorted({k for r in rows for k in r["median_ms"]} - {"nnc"})
    md = report.header("nnc vs peers", mach, load_after)
    md += ["Median latency in ms (median over %d alternating rounds of each run's median); "
           "ratio = nnc / peer (below 1: nnc faster)." % args.rounds, ""]
    md += ["- %s" % note for note in notes] + [""]
    table_rows = []
    for r in rows:
        m = r["median_ms"]
        cells = [r["model"], r["threads"], "%.4g" % m["nnc"] if "nnc" in m else "-"]
        for p in peers:
            ok = p in m and "nnc" in m
            cells += ["%.4g" % m[p] if ok else "-", "%.2f" % (m["nnc"] / m[p]) if ok else "-"]
        table_rows.append(cells)
    md += report.table(["model", "threads", "nnc"] + [c for p in peers
                                                      for c in (p, "nnc/" + p)], table_rows)
    if gemm:
        md += ["", "SGEMM %dx%dx%d, GFLOP/s (median of rounds):" % (1024, 1024, 1024), ""]
        names = sorted({k for r in gemm for k in r["gflops"]})
        md += report.table(["threads"] + names, [
            [r["threads"]] + ["%.1f" % r["gflops"][k] if k in r["gflops"] else "-"
                              for k in names] for r in gemm])
    md += ["", "Commands (per round; the order flips every round):", ""]
    md += report.commands_block([c for cmds in commands.values() for c in cmds.values()])
    report.write(out_md, md, {"machine": mach, "load_after": load_after, "rounds": args.rounds,
                              "notes": notes, "commands": commands, "models": rows,
                              "sgemm": gemm})
    plot(stem, models, threads, rows, peers, mach["date"])


if __name__ == "__main__":
    main()
