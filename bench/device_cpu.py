#!/usr/bin/env python3
"""nnc's CPU target against ONNX Runtime on a lent machine (another CPU than the build host's).

Runs on the machine that bench/device_bundle.sh's folder was carried to. That machine has no
Debian packages, so nnc runs from the bundle through its own ld.so, and ONNX Runtime is the
machine's Python package, run by bench/ort/ort_bench.py in its own process with its default
spinning pool (nncbench.ort; without the package only nnc's figures are written).
Per model: refills the stripped weights (bench/refill_weights.py fill: random values of the
original statistics, so timings only, no output check), draws an input of the recorded shape,
then for each thread count times `nnc bench --json` and ORT, alternately (the order flips every
round), each the median of --iterations runs after 2 warmups, both pinned to the same cores.
`--ort in-process` times ORT inside nnc instead, from the bundle's C library
(device_bundle.sh puts it in): `nnc bench --compare ort`, spinning off, run by run. The rounds
repeat the whole list (the lent machines seen so far are shared hosts whose speed moves by 25%
between minutes: quote medians over rounds). Appends every line to OUT/summary.txt as it goes,
so a run cut short still reports what it finished, and stops starting models past --budget
seconds.

    python3 device_cpu.py --carry DIR --out OUT [--threads 1,2] [--rounds 2]
        [--iterations 10] [--budget 330] [--models a,b] [--profile vit_b_16]
        [--ort process|in-process|none] [--ort-spin default|0|1]

With --profile, the profiled model's nnc kernels (`nnc bench --profile --json`) and ONNX
Runtime's nodes (its own profiler, ort_bench.py --profile) are written as JSON beside the
summary, to be compared node by node where the figures can be read.

A benchmark, not a test: it reports figures and asserts nothing.
"""
import argparse
import json
import os
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nncbench import machine, nnc as nncb, ort as ortpeer, proc  # noqa: E402
from nncbench.device import bundle_nnc, make_log, pin_cores  # noqa: E402
from nncbench.stats import median, order  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--carry", default=HERE, help="the folder device_bundle.sh wrote")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/device-cpu"))
    ap.add_argument("--work", default="/tmp/nnc-device")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--budget", type=float, default=330, help="seconds; no model starts later")
    ap.add_argument("--models", default="", help="comma-separated (default: every one carried)")
    ap.add_argument("--profile", default="vit_b_16",
                    help="a model to profile at 1 thread after the rounds ('' for none)")
    ap.add_argument("--ort", choices=["process", "in-process", "none"], default="process",
                    help="ORT in its own process (Python onnxruntime), inside nnc bench "
                         "(--compare ort, the bundle's library), or not at all")
    ap.add_argument("--ort-spin", choices=["default", "0", "1"], default="default",
                    help="with --ort process: ORT's session.intra_op.allow_spinning")
    args = ap.parse_args()
    deadline = time.time() + args.budget
    os.makedirs(args.out, exist_ok=True)
    log = make_log(os.path.join(args.out, "summary.txt"))
    threads = [int(t) for t in args.threads.split(",")]
    cores = pin_cores(threads)

    t0 = time.time()
    bundle, models_dir = os.path.join(args.work, "b"), os.path.join(args.work, "m")
    if not os.path.exists(os.path.join(bundle, "nnc")):
        tarfile.open(os.path.join(args.carry, "bundle.tar.xz")).extractall(bundle)
        tarfile.open(os.path.join(args.carry, "models.tar.xz")).extractall(models_dir)
    log("unpacked in %.1f s; cores %s" % (time.time() - t0, cores))
    nnc = bundle_nnc(bundle)
    # The CPU only: an image's own OpenCL driver (PoCL built with another LLVM) has crashed a
    # process holding LLVM 15 when the ICD loader opened it, so the loader gets no vendors.
    no_icd = {"OCL_ICD_VENDORS": os.path.join(args.work, "no-icd")}
    log(machine.line(machine.describe(nnc, no_icd)))

    ort_lib = os.path.join(bundle, "ort", "libonnxruntime.so.1")
    nnc_env = None
    peer = None
    if args.ort == "in-process":
        if not os.path.exists(ort_lib):
            sys.exit("device_cpu: --ort in-process needs %s (device_bundle.sh)" % ort_lib)
        nnc_env = {"NNC_ORT_LIBRARY": ort_lib}
        log("ONNX Runtime: the bundle's C library, alternated with nnc run by run by "
            "`nnc bench --compare ort` (spinning off)")
    elif args.ort == "process":
        peer = ortpeer.OrtPeer("python", None if args.ort_spin == "default" else args.ort_spin)
        if peer.missing():
            log("%s: nnc's figures only" % peer.missing())
            peer = None
        else:
            log(peer.describe(proc.run([peer.python, "-c", "import onnxruntime; "
                                        "print(onnxruntime.__version__)"])[1].strip()))

    input_names = {}

    def input_name(path):
        """The graph's input that no initializer feeds (the exports name it "input"), read
        once per model (loading ViT-B/16 parses 330 MB)."""
        if path not in input_names:
            import onnx
            g = onnx.load(path, load_external_data=False).graph
            fed = {t.name for t in g.initializer}
            input_names[path] = next(i.name for i in g.input if i.name not in fed)
        return input_names[path]

    import numpy as np
    names = args.models.split(",") if args.models else sorted(os.listdir(models_dir))
    results = {}
    for rnd in range(args.rounds):
        for m in names:
            if time.time() > deadline:
                log("budget spent: round %d stops before %s" % (rnd, m))
                break
            d = os.path.join(models_dir, m)
            path, inp = os.path.join(d, "filled.onnx"), os.path.join(d, "input.npy")
            if not os.path.exists(path):
                refill = os.path.join(args.carry, "refill_weights.py")
                if not os.path.exists(refill):
                    refill = os.path.join(HERE, "refill_weights.py")
                rc, out, err = proc.run([sys.executable, refill, "fill",
                                         os.path.join(d, "model.onnx"), path], timeout=180)
                if rc:
                    log(m, "refill failed:", err.strip()[-300:])
                    continue
            if not os.path.exists(inp):
                shape = json.load(open(os.path.join(d, "shape.json")))
                np.save(inp, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
            feed = input_name(path) + "=" + inp
            for t in threads:
                engines = {"nnc": lambda: nncb.bench(
                    nnc, path, t, args.iterations, 2,
                    ["--input", feed] + (["--compare", "ort"] if nnc_env else []), nnc_env,
                    timeout=180)}
                if peer:
                    engines["ort"] = lambda: peer.run(path, t, args.iterations, 2,
                                                      inputs=[feed], timeout=180)
                got = {}
                for who in order(engines, rnd):
                    rep, err = engines[who]()
                    if err:
                        log(m, "%dT %s failed: %s" % (t, who, err[-300:]))
                        continue
                    got[who] = rep["median_ms"]
                    if who == "nnc" and "ort_median_ms" in rep:
                        got["ort"] = rep["ort_median_ms"]
                if "nnc" not in got:
                    continue
                nm, om = got["nnc"], got.get("ort", float("nan"))
                results.setdefault((m, t), []).append((nm, om))
                log("round %d %-30s %dT nnc %9.3f ms  ort %9.3f ms  nnc/ort %.3f" %
                    (rnd, m, t, nm, om, nm / om))
    log("\nmedians over rounds (nnc/ort of each round, then the median ratio):")
    for (m, t), runs in sorted(results.items()):
        ratios = [n / o for n, o in runs if o == o]
        med = median(ratios) if ratios else float("nan")
        log("%-30s %dT  nnc %s  ort %s  ratios %s  median %.3f" %
            (m, t, ["%.2f" % n for n, _ in runs], ["%.2f" % o for _, o in runs],
             ["%.2f" % r for r in ratios], med))
    if args.profile and time.time() < deadline:
        d = os.path.join(models_dir, args.profile)
        path = os.path.join(d, "filled.onnx")
        if os.path.exists(path):
            feed = input_name(path) + "=" + os.path.join(d, "input.npy")
            cmd = nnc + ["bench", path, "--input", feed, "--threads", "1", "--iterations", "5",
                         "--warmup", "1", "--profile"]
            rc, out, err = proc.run(cmd, timeout=180)
            with open(os.path.join(args.out, args.profile + "_profile.txt"), "w") as f:
                f.write(out + err)
            log("%s profile, 1 thread:\n%s" % (args.profile, "\n".join(
                l[:160] for l in out.splitlines()[:16])))
            rc, out, err = proc.run(cmd + ["--json"], timeout=180)
            with open(os.path.join(args.out, args.profile + "_profile.json"), "w") as f:
                f.write(out if rc == 0 else err)
            if peer and time.time() < deadline:
                nodes_file = os.path.join(args.out, args.profile + "_ort_nodes.json")
                _, err = peer.run(path, 1, 5, 2, inputs=[feed], extra=["--profile", nodes_file],
                                  timeout=180)
                if err:
                    log("%s: ORT's profile failed: %s" % (args.profile, err))
                else:
                    nodes = json.load(open(nodes_file))
                    log("%s: ORT's profile has %d nodes, %.1f ms in all (mean per run)" % (
                        args.profile, len(nodes), sum(v["mean"] for v in nodes.values())))
    log("done in %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
