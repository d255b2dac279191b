#!/usr/bin/env python3
"""Skinny SGEMMs (M = 1, 4, 16, 64 rows by a constant weight of K x N = 512..8000): nnc against oneDNN.

Decode-time matmuls (one token, a few beams, a short prompt) read a weight that a model run last
touched a whole run ago: `nnc-sgemm-bench --flush 64` reads 64 MB before each timed call, so B
comes from memory. For each shape and thread count the program alternates nnc, oneDNN
(dnnl_sgemm) call by call; its figures are medians over --rounds calls, timed at 1 thread by the
calling thread's CPU time (`--clock cpu`: on a host shared with other work a call the
scheduler preempts is not charged the wait; memory stalls still count) and at 2 threads by the
wall clock. This script quotes them against the machine's peaks: nnc's GEMM peak (`nnc bench --profile`'s
machine line) and as bandwidth the larger of nnc's (its fused elementwise kernel) and STREAM's
(build/bench/nnc_stream, the best run of its best kernel: on a shared host the medians of
both are the other tenants' as much as the machine's); GFLOP/s for the shapes the arithmetic
bounds, weight GB/s for those the weight stream bounds (the larger of weight bytes / bandwidth
and flops / peak decides which, as `--profile` does). Both bandwidths count the bytes a kernel
writes too; reading a weight, one core can go past them.

    python3 bench/skinny_gemm.py [--bench build/bench/sgemm/nnc-sgemm-bench]
        [--nnc build/tools/nnc/nnc] [--threads 1,2] [--rounds 30] [--m 1,4,16,64]
        [--out FILE.md]

Writes bench/results/gemm-skinny.md (and .json). A benchmark, not a test.
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, proc, report  # noqa: E402

SHAPES = [(512, 512), (512, 1536), (512, 2048), (2048, 512), (512, 8000), (8000, 512)]


def peaks(nnc_path, threads, env):
    """nnc's measured (GFLOP/s, GB/s) at `threads`, from `nnc bench --profile` on a tiny graph."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.nir")
        with open(path, "w") as f:
            f.write(nnc.matmul_graph(8))
        res, err = nnc.bench(nnc_path, path, threads, 3, 1, ["--profile"], env)
    if err:
        sys.exit("nnc bench --profile: " + err)
    return res["profile"]["peak_gflops"], res["profile"]["peak_gbps"]


def stream_best(stream, threads):
    """STREAM's best run of its best kernel at `threads`, GB/s (0 when it cannot run)."""
    if not os.access(stream, os.X_OK):
        return 0.0
    rc, out, _ = proc.run([stream, "--elements", str(1 << 24), "--threads", str(threads),
                           "--reps", "10", "--json"])
    rates = [r["best_gbs"] for r in proc.json_lines(out) if "best_gbs" in r] if rc == 0 else []
    return max(rates) if rates else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=os.path.join(nnc.ROOT, "build", "bench", "sgemm",
                                                    "nnc-sgemm-bench"))
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--stream", default=os.path.join(nnc.ROOT, "build", "bench", "nnc_stream"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--m", default="1,4,16,64")
    ap.add_argument("--flush", type=int, default=64, help="MB read before each timed call")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    nnc.require(args.bench, "nnc-sgemm-bench", "scripts/build.sh with a BLAS peer installed")
    nnc.require(args.nnc)
    env = {"NNC_CACHE_DIR": os.environ.get("NNC_CACHE_DIR", os.path.expanduser(
        "~/.cache/nnc/skinny-gemm/objects"))}
    mach = machine.describe(args.nnc)
    threads = [int(t) for t in args.threads.split(",")]
    rows = []
    for t in threads:
        gflops_peak, nnc_gbps = peaks(args.nnc, t, env)
        stream_gbps = stream_best(args.stream, t)
        gbps_peak = max(nnc_gbps, stream_gbps)
        for m in [int(x) for x in args.m.split(",")]:
            for k, n in SHAPES:
                res, err = proc.run_json([args.bench, "--m", str(m), "--k", str(k), "--n", str(n),
                                          "--threads", str(t), "--rounds", str(args.rounds),
                                          "--flush", str(args.flush), "--peers", "nnc,onednn",
                                          "--clock", "cpu" if t == 1 else "wall"], env)
                if err:
                    sys.exit("nnc-sgemm-bench: " + err)
                weights_ms = 4.0 * k * n / (gbps_peak * 1e6)
                flops_ms = 2.0 * m * k * n / (gflops_peak * 1e6)
                memory = weights_ms > flops_ms
                row = dict(res, peak_gflops=gflops_peak, peak_gbps=gbps_peak, nnc_gbps=nnc_gbps,
                           stream_gbps=stream_gbps, bound="memory" if memory else "compute")
                rows.append(row)
                frac = (res["nnc_weight_gbps"] / gbps_peak if memory
                        else res["nnc_gflops"] / gflops_peak)
                print("%dT m %3d k %5d n %5d  nnc %7.1f GFLOP/s %6.2f GB/s  onednn %7.1f GFLOP/s "
                      "%6.2f GB/s  %s-bound, nnc at %.0f%% of its peak" % (
                          t, m, k, n, res["nnc_gflops"], res["nnc_weight_gbps"],
                          res.get("onednn_gflops", 0), res.get("onednn_weight_gbps", 0),
                          "memory" if memory else "compute", 100 * frac), flush=True)
    path = report.result_path("gemm-skinny", args.out)
    lines = report.header("Skinny SGEMM (M = %s) by a cold constant weight: nnc vs oneDNN" %
                          args.m, mach, machine.load(), [
                              "B evicted before each call (%d MB read); medians of %d calls per "
                              "peer, alternating; 1 thread timed by the calling thread's CPU "
                              "time, 2 threads by the wall clock." % (args.flush, args.rounds)])
    lines += ["Peaks: nnc's GEMM (`nnc bench --profile`), and as bandwidth the larger of nnc's "
              "fused elementwise kernel and STREAM's best run: " +
              ", ".join("%dT %.1f GFLOP/s, %.1f GB/s (nnc %.1f, STREAM %.1f)" % (
                  t, r["peak_gflops"], r["peak_gbps"], r["nnc_gbps"], r["stream_gbps"])
                        for t, r in {r["threads"]: r for r in rows}.items()) + ".", ""]
    table = []
    for r in rows:
        memory = r["bound"] == "memory"
        frac = (r["nnc_weight_gbps"] / r["peak_gbps"] if memory
                else r["nnc_gflops"] / r["peak_gflops"])
        table.append([str(r["threads"]), str(r["m"]), str(r["k"]), str(r["n"]), r["bound"],
                      "%.1f" % r["nnc_gflops"], "%.2f" % r["nnc_weight_gbps"],
                      "**%.0f%%**" % (100 * frac),
                      "%.1f" % r.get("onednn_gflops", 0), "%.2f" % r.get("onednn_weight_gbps", 0),
                      "%.2f" % r.get("nnc_over_onednn", 0), "%.1g" % r["max_abs_diff"]])
    lines += report.table(["threads", "M", "K", "N", "bound", "nnc GFLOP/s", "nnc weight GB/s",
                           "nnc of its peak", "oneDNN GFLOP/s", "oneDNN weight GB/s",
                           "nnc / oneDNN (rate)", "max abs diff"], table)
    report.write(path, lines, {"machine": mach, "rounds": args.rounds, "flush_mb": args.flush,
                               "rows": rows})


if __name__ == "__main__":
    main()
