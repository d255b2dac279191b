#!/usr/bin/env python3
"""nnc's CPU target against ONNX Runtime on a lent machine (another CPU than the build host's).

Runs on the machine that bench/device_bundle.sh's folder was carried to. That machine has no
Debian packages, so nnc runs from the bundle through its own ld.so, and ONNX Runtime is the
machine's Python package (`import onnxruntime`; without it only nnc's figures are written).
Per model: refills the stripped weights (bench/refill_weights.py fill: random values of the
original statistics, so timings only, no output check), draws an input of the recorded shape,
then for each thread count times `nnc bench --json` and an ORT session configured as
`nnc bench --compare ort` configures it (all graph optimizations, sequential, one inter-op
thread, no spinning), each the median of --iterations runs after 2 warmups. When the bundle
carries ONNX Runtime's C library (device_bundle.sh puts it in), ORT is timed inside nnc instead:
`nnc bench --compare ort`, which alternates the two engines run by run, so a minute when the
shared host slows down slows both. Both run pinned to
the same cores. The rounds repeat the whole list (the lent machines seen so far are shared
hosts whose speed moves by 25% between minutes: quote medians over rounds). Appends every line
to OUT/summary.txt as it goes, so a run cut short still reports what it finished, and stops
starting models past --budget seconds.

    python3 device_cpu.py --carry DIR --out OUT [--threads 1,2] [--rounds 2]
        [--iterations 10] [--budget 330] [--models a,b] [--profile vit_b_16]

With --profile, the profiled model's nnc kernels (`nnc bench --profile --json`) and ONNX
Runtime's nodes (its own profiler, the Python package) are written as JSON beside the summary,
to be compared node by node where the figures can be read.

A benchmark, not a test: it reports figures and asserts nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make_log(path):
    """A print that also appends each line to `path` (a run cut short keeps what it said)."""
    def log(*a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        with open(path, "a") as f:
            f.write(line + "\n")
    return log


def pin_cores(threads):
    """Pins this process (and what it starts) to cores 2.. when there are enough (0 and 1
    take the host's interrupts and daemons); returns them."""
    avail = sorted(os.sched_getaffinity(0))
    cores = avail[2:2 + max(threads)] if len(avail) >= 2 + max(threads) else avail
    os.sched_setaffinity(0, cores)
    return cores


def bundle_nnc(bundle):
    """The command that runs the bundle's nnc through its own ld.so and libraries."""
    return [os.path.join(bundle, "lib/ld-linux-x86-64.so.2"), "--library-path",
            os.path.join(bundle, "lib"), os.path.join(bundle, "nnc")]


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
    args = ap.parse_args()
    deadline = time.time() + args.budget
    os.makedirs(args.out, exist_ok=True)
    log = make_log(os.path.join(args.out, "summary.txt"))
    threads = [int(t) for t in args.threads.split(",")]
    cores = pin_cores(threads)

    def sh(cmd, timeout=180, env=None):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            return r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            return 124, "", "timed out after %d s" % timeout

    t0 = time.time()
    bundle, models_dir = os.path.join(args.work, "b"), os.path.join(args.work, "m")
    if not os.path.exists(os.path.join(bundle, "nnc")):
        tarfile.open(os.path.join(args.carry, "bundle.tar.xz")).extractall(bundle)
        tarfile.open(os.path.join(args.carry, "models.tar.xz")).extractall(models_dir)
    log("unpacked in %.1f s; cores %s" % (time.time() - t0, cores))
    nnc = bundle_nnc(bundle)
    ort_lib = os.path.join(bundle, "ort", "libonnxruntime.so.1")
    nnc_env = dict(os.environ, NNC_ORT_LIBRARY=ort_lib) if os.path.exists(ort_lib) else None
    log("ONNX Runtime: " + ("the bundle's C library, alternated with nnc by `nnc bench "
                            "--compare ort`" if nnc_env else "the Python package, timed after nnc"))
    refill = os.path.join(args.carry, "refill_weights.py")
    if not os.path.exists(refill):
        refill = os.path.join(HERE, "refill_weights.py")
    rc, out, err = sh(["sh", "-c", "lscpu | grep -v -e '^Flags' -e '^Vulnerab'; "
                       "grep -m1 -o 'avx512[a-z_]*\\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\\n' ' '"])
    log(out.strip())
    # The CPU only: an image's own OpenCL driver (PoCL built with another LLVM) has crashed a
    # process holding LLVM 15 when the ICD loader opened it, so the loader gets no vendors.
    rc, out, err = sh(nnc + ["devices"], timeout=60,
                      env=dict(os.environ, OCL_ICD_VENDORS=os.path.join(args.work, "no-icd")))
    log("nnc devices:", out.strip().splitlines()[0] if out.strip() else err.strip()[-300:])

    import numpy as np
    try:
        import onnxruntime as ort
        log("onnxruntime", ort.__version__)
    except ImportError as e:
        ort = None
        log("no onnxruntime module (%s): nnc's figures only" % e)

    def ort_session(path, t, profile=False):
        """An ORT session configured as `nnc bench --compare ort` configures it."""
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if profile:
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(args.work, "ortprof")
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def ort_median(path, x, t):
        s = ort_session(path, t)
        feed = {s.get_inputs()[0].name: x}
        for _ in range(2):
            s.run(None, feed)
        times = []
        for _ in range(args.iterations):
            a = time.perf_counter()
            s.run(None, feed)
            times.append((time.perf_counter() - a) * 1e3)
        return statistics.median(times)

    def ort_profile(path, x, t=1, runs=5):
        """ORT's own per-node profile at t threads: {node: {"mean": ms, "min": ms, "op": type}}
        over `runs` runs after 2 warmups (its profiler's "<node>_kernel_time" events)."""
        s = ort_session(path, t, profile=True)
        feed = {s.get_inputs()[0].name: x}
        for _ in range(2 + runs):
            s.run(None, feed)
        events = json.load(open(s.end_profiling()))
        per, ops = {}, {}
        suffix = "_kernel_time"
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith(suffix):
                n = e["name"][:-len(suffix)]
                per.setdefault(n, []).append(e["dur"] / 1e3)
                ops[n] = e.get("args", {}).get("op_name")
        # The first two runs are warmups.
        return {n: {"mean": statistics.mean(v[2:] or v), "min": min(v[2:] or v), "op": ops[n]}
                for n, v in per.items()}

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
                rc, out, err = sh([sys.executable, refill, "fill", os.path.join(d, "model.onnx"),
                                   path])
                if rc:
                    log(m, "refill failed:", err.strip()[-300:])
                    continue
            if not os.path.exists(inp):
                shape = json.load(open(os.path.join(d, "shape.json")))
                np.save(inp, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
            x = np.load(inp)
            name = input_name(path)
            for t in threads:
                cmd = nnc + ["bench", path, "--input", name + "=" + inp, "--threads", str(t),
                             "--iterations", str(args.iterations), "--warmup", "2", "--json"]
                rc, out, err = sh(cmd + (["--compare", "ort"] if nnc_env else []), env=nnc_env)
                try:
                    rep = json.loads(out.strip().splitlines()[-1])
                    nm = rep["median_ms"]
                except (ValueError, IndexError, KeyError):
                    log(m, "%dT nnc failed (%d): %s" % (t, rc, err.strip()[-300:]))
                    continue
                om = rep.get("ort_median_ms", float("nan"))
                if ort and not nnc_env:
                    try:
                        om = ort_median(path, x, t)
                    except Exception as e:  # ORT's errors are its own exception types
                        log(m, "%dT ort failed: %s" % (t, str(e)[-300:]))
                results.setdefault((m, t), []).append((nm, om))
                log("round %d %-30s %dT nnc %9.3f ms  ort %9.3f ms  nnc/ort %.3f" %
                    (rnd, m, t, nm, om, nm / om))
    log("\nmedians over rounds (nnc/ort of each round, then the median ratio):")
    for (m, t), runs in sorted(results.items()):
        ratios = [n / o for n, o in runs if o == o]
        med = statistics.median(ratios) if ratios else float("nan")
        log("%-30s %dT  nnc %s  ort %s  ratios %s  median %.3f" %
            (m, t, ["%.2f" % n for n, _ in runs], ["%.2f" % o for _, o in runs],
             ["%.2f" % r for r in ratios], med))
    if args.profile and time.time() < deadline:
        d = os.path.join(models_dir, args.profile)
        if os.path.exists(os.path.join(d, "filled.onnx")):
            path = os.path.join(d, "filled.onnx")
            rc, out, err = sh(nnc + ["bench", path, "--input",
                                     input_name(path) + "=" + os.path.join(d, "input.npy"),
                                     "--threads", "1",
                                     "--iterations", "5", "--warmup", "1", "--profile"])
            with open(os.path.join(args.out, args.profile + "_profile.txt"), "w") as f:
                f.write(out + err)
            log("%s profile, 1 thread:\n%s" % (args.profile, "\n".join(
                l[:160] for l in out.splitlines()[:16])))
            rc, out, err = sh(nnc + ["bench", path, "--input",
                                     input_name(path) + "=" + os.path.join(d, "input.npy"),
                                     "--threads", "1", "--iterations", "5", "--warmup", "1",
                                     "--profile", "--json"])
            with open(os.path.join(args.out, args.profile + "_profile.json"), "w") as f:
                f.write(out if rc == 0 else err)
            if ort and time.time() < deadline:
                nodes = ort_profile(path, np.load(os.path.join(d, "input.npy")))
                with open(os.path.join(args.out, args.profile + "_ort_nodes.json"), "w") as f:
                    json.dump(nodes, f)
                log("%s: ORT's profile has %d nodes, %.1f ms in all (mean per run)" % (
                    args.profile, len(nodes), sum(v["mean"] for v in nodes.values())))
    log("done in %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
