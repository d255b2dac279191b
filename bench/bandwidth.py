#!/usr/bin/env python3
"""nnc's fused elementwise chain against the machine's memory bandwidth, measured in one run.

The chain is one input and one output of 16M floats (64 MiB each) with several elementwise
ops between them (scale, shift, clip: y = min(max(x * 1.5 + 0.25, 0), 6) - 0.5), written as
a text-IR graph; nnc fuses it into one kernel. The bandwidth peer is nnc_stream (built from
bench/bandwidth/stream.cpp): STREAM copy/scale/add/triad with ordinary and with
non-temporal stores. For each thread count, `nnc bench --json` and nnc_stream run alternately
(the order flips every round); each figure is the median over rounds of each run's median.

nnc's rate counts what STREAM counts for its scale kernel (read x once, write y once:
2 x 64 MiB per run), so the like-for-like ratio is nnc / STREAM scale with the same kind of
store; the headline ratio is nnc / the best STREAM kernel (the machine's measured bandwidth).

    python3 bench/bandwidth.py [--nnc build/tools/nnc/nnc] [--stream build/bench/nnc_stream]
                               [--threads 1,2] [--rounds 5] [--elements 16777216] [--out F.md]

Writes bench/results/bandwidth.md and .json. A benchmark, not a test.
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, proc, report  # noqa: E402
from nncbench.nnc import ROOT  # noqa: E402
from nncbench.stats import median, order  # noqa: E402


def chain_graph(n):
    """The text IR of the chain over f32[n]."""
    t = "f32[%d]" % n
    return "\n".join([
        "graph @elementwise_chain(%%x: %s) -> (%s) {" % (t, t),
        "  %scale = constant {value = dense<f32[]>[1.5]} : f32[]",
        "  %shift = constant {value = dense<f32[]>[0.25]} : f32[]",
        "  %zero = constant {value = dense<f32[]>[0]} : f32[]",
        "  %six = constant {value = dense<f32[]>[6]} : f32[]",
        "  %half = constant {value = dense<f32[]>[0.5]} : f32[]",
        "  %%a = mul(%%x, %%scale) : %s" % t,
        "  %%b = add(%%a, %%shift) : %s" % t,
        "  %%c = max(%%b, %%zero) : %s" % t,
        "  %%d = min(%%c, %%six) : %s" % t,
        "  %%y = sub(%%d, %%half) : %s" % t,
        "  return %y",
        "}",
        "",
    ])


def run_json_lines(cmd, env):
    rc, out, err = proc.run(cmd, env)
    if rc != 0:
        sys.exit("failed (%d): %s\n%s" % (rc, " ".join(cmd), err))
    return proc.json_lines(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--stream", default=os.path.join(ROOT, "build", "bench", "nnc_stream"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--iterations", type=int, default=10, help="timed runs per invocation")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    for exe in (args.nnc, args.stream):
        nnc.require(exe, os.path.basename(exe), "ninja -C build nnc nnc_stream")
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get(
        "NNC_CACHE_DIR", os.path.join(tempfile.gettempdir(), "nnc-cache-bench"))}
    n = args.elements
    nbytes = 2 * 4 * n  # read x, write y

    tmp = tempfile.mkdtemp(prefix="nnc-bandwidth-")
    model = os.path.join(tmp, "chain.nir")
    with open(model, "w") as f:
        f.write(chain_graph(n))

    mach = machine.describe(args.nnc)
    results = {}
    commands = []
    for t in threads:
        nnc_cmd = nnc.bench_command(args.nnc, model, t, args.iterations, 2)
        stream_cmd = [args.stream, "--elements", str(n), "--threads", str(t), "--reps",
                      str(args.iterations), "--json"]
        commands += [nnc_cmd, stream_cmd]
        nnc_ms, stream = [], {}
        for r in range(args.rounds):
            for who in order(["nnc", "stream"], r):
                if who == "nnc":
                    nnc_ms.append(run_json_lines(nnc_cmd, env)[-1]["median_ms"])
                else:
                    for row in run_json_lines(stream_cmd, env):
                        stream.setdefault((row["kernel"], row["stores"]), []).append(
                            row["median_gbs"])
        nnc_gbs = nbytes / (median(nnc_ms) * 1e-3) / 1e9
        peer = {"%s/%s" % k: median(v) for k, v in stream.items()}
        best_key = max(peer, key=peer.get)
        results[t] = {
            "nnc_median_ms": median(nnc_ms),
            "nnc_gbs": nnc_gbs,
            "nnc_run_medians_ms": nnc_ms,
            "stream_gbs": peer,
            "best_stream": best_key,
            "ratio_vs_best": nnc_gbs / peer[best_key],
            "ratio_vs_scale_ordinary": nnc_gbs / peer["scale/ordinary"],
            "ratio_vs_scale_nontemporal": nnc_gbs / peer["scale/nontemporal"],
        }
        print("threads %d: nnc %.2f GB/s (median %.3f ms); STREAM best %s %.2f GB/s -> %.2f; "
              "scale ordinary %.2f (%.2f), scale nontemporal %.2f (%.2f)" % (
                  t, nnc_gbs, median(nnc_ms), best_key, peer[best_key],
                  results[t]["ratio_vs_best"], peer["scale/ordinary"],
                  results[t]["ratio_vs_scale_ordinary"], peer["scale/nontemporal"],
                  results[t]["ratio_vs_scale_nontemporal"]), flush=True)
    load_after = machine.load()

    out = report.result_path("bandwidth", args.out)
    kernels = sorted(next(iter(results.values()))["stream_gbs"])
    md = report.header("Elementwise chain vs memory bandwidth", mach, load_after)
    md += ["Chain y = min(max(x*1.5+0.25, 0), 6) - 0.5 on f32[%d] (one fused kernel), "
           "%d bytes moved per run. Alternating with nnc_stream, %d rounds; medians of "
           "run medians." % (n, nbytes, args.rounds), ""]
    md += report.table(["threads", "nnc GB/s"] + kernels + ["nnc / best",
                                                            "nnc / scale (ordinary)"], [
        [t, "%.2f" % r["nnc_gbs"]] + ["%.2f" % r["stream_gbs"][k] for k in kernels] +
        ["%.2f" % r["ratio_vs_best"], "%.2f" % r["ratio_vs_scale_ordinary"]]
        for t, r in results.items()])
    md += ["", "Commands (per round, alternating):", ""] + report.commands_block(commands)
    report.write(out, md, {"machine": mach, "load_after": load_after, "elements": n,
                           "rounds": args.rounds, "iterations": args.iterations,
                           "results": results})


if __name__ == "__main__":
    main()
