#!/usr/bin/env python3
"""`nnc bench --profile` on the CPU.

On a small conv + matmul model (text IR, with node names): the JSON profile has one entry per
kernel of the executable, each naming the graph nodes it computes (every node of the graph
is named by some kernel), the kernel times are positive and their sum is at most the run's
median plus what profiling adds (they are timed inside the runs); the GEMMs report GFLOP/s and
the others GB/s, and a GEMM its roofline (bytes / bandwidth, flops / peak, the bound);
the peak figures are positive and kept in the cache folder for the next run;
`--trace` writes a Chrome trace with one complete event per kernel in launch order. A fused
softmax(Q K^T) V group reports its two GEMMs' work (2 B S T (D + E) flops). An integer GEMM
(matmul_integer, u8 x s8) reports GOP/s against the machine's int8 peak, and under
`--precision bf16` (where the CPU has it) the matmul runs bf16 tiles rated against the bf16
peak, while the other kernels keep the f32 peaks. Bad use
(`--trace` on interp, an unwritable trace path) fails with one message.

Usage: cpu_profile_test.py NNC_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

NNC = sys.argv[1]


def dense(n, scale):
    return ", ".join(str(scale * ((i * 7) % 11 - 5)) for i in range(n))


MODEL = """graph @m(%%x: f32[1,8,10,10]) -> (f32[1,16,10]) {
  %%w = constant {value = dense<f32[16,8,3,3]>[%s]} : f32[16,8,3,3]
  %%b = constant {value = dense<f32[16]>[%s]} : f32[16]
  %%m = constant {value = dense<f32[10,10]>[%s]} : f32[10,10]
  %%zero = constant {value = dense<f32[]>[0]} : f32[]
  %%c = conv(%%x, %%w, %%b) {dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]} : f32[1,16,10,10] @"block/conv"
  %%r = max(%%c, %%zero) : f32[1,16,10,10] @"block/relu"
  %%p = reduce_max(%%r) {axes = [3], keepdims = 0} : f32[1,16,10] @"block/pool"
  %%y = matmul(%%p, %%m) : f32[1,16,10] @"head/matmul"
  return %%y
}
""" % (dense(16 * 8 * 9, 0.05), dense(16, 0.1), dense(100, 0.1))
ATTENTION = """graph @a(%q: f32[2,40,16], %kt: f32[2,16,40], %v: f32[2,40,8]) -> (f32[2,40,8]) {
  %s = matmul(%q, %kt) : f32[2,40,40] @"attn/qk"
  %p = softmax(%s) {axis = -1} : f32[2,40,40] @"attn/softmax"
  %y = matmul(%p, %v) : f32[2,40,8] @"attn/pv"
  return %y
}
"""
INTEGER = """graph @q(%%x: u8[16,64]) -> (i32[16,32]) {
  %%w = constant {value = dense<i8[64,32]>[%s]} : i8[64,32]
  %%y = matmul_integer(%%x, %%w) : i32[16,32] @"q/matmul"
  return %%y
}
""" % ", ".join(str((i * 37) % 255 - 127) for i in range(64 * 32))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def nnc(args, env):
    return subprocess.run([NNC] + args, capture_output=True, text=True, env=env, timeout=600)


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "m.nir")
    with open(model, "w") as f:
        f.write(MODEL)
    env = dict(os.environ)
    env["NNC_CACHE_DIR"] = os.path.join(tmp, "cache", "objects")
    trace = os.path.join(tmp, "trace.json")
    r = nnc(["bench", model, "--threads", "1", "--iterations", "20", "--warmup", "2",
             "--profile", "--json", "--trace", trace], env)
    check(r.returncode == 0, "bench --profile --json exits 0: " + r.stderr)
    if r.returncode == 0:
        out = json.loads(r.stdout.strip().splitlines()[-1])
        prof = out.get("profile", {})
        kernels = prof.get("kernels", [])
        check(len(kernels) == out["kernels"] and kernels,
              "one profile entry per kernel (%d vs %d)" % (len(kernels), out["kernels"]))
        check(prof.get("runs") == 20, "the 20 timed runs are profiled: %s" % prof.get("runs"))
        named = set()
        for k in kernels:
            check(k["sources"], "kernel %s names its nodes" % k["name"])
            named.update(k["sources"])
            check(k["ms"] > 0, "kernel %s has a time" % k["name"])
            check(("gflops" in k) != ("gbps" in k), "kernel %s has one rate" % k["name"])
        for node in ("block/conv", "block/relu", "block/pool", "head/matmul"):
            check(node in named, "node %s is named by a kernel (%s)" % (node, sorted(named)))
        check(any("gflops" in k for k in kernels), "the GEMMs report GFLOP/s")
        # The matmul's roofline: its parameters' bytes (the weight, a constant [10, 10] packed
        # into panels, the activations and the result: at least 400 + 640 + 640) at the memory
        # peak and its flops (2 x 16 x 10 x 10) at the GEMM peak.
        mm = [k for k in kernels if "head/matmul" in k["sources"]]
        check(len(mm) == 1, "one kernel computes the matmul: %s" % kernels)
        if mm:
            roof = mm[0].get("roofline", {})
            check(mm[0]["bytes"] >= 1680 and mm[0]["flops"] == 2 * 16 * 10 * 10,
                  "the matmul's bytes and flops: %s" % mm[0])
            want_w = mm[0]["bytes"] / (prof["peak_gbps"] * 1e6)
            want_f = mm[0]["flops"] / (prof["peak_gflops"] * 1e6)
            check(abs(roof.get("memory_ms", -1) - want_w) <= 1e-6 + 1e-3 * want_w and
                  abs(roof.get("flops_ms", -1) - want_f) <= 1e-6 + 1e-3 * want_f,
                  "the roofline is bytes / bandwidth and flops / peak: %s" % mm[0])
            check(roof.get("bound") == ("memory" if want_w > want_f else "compute"),
                  "the larger time is the bound: %s" % mm[0])
        check(all("roofline" not in k for k in kernels if k["flops"] == 0),
              "a kernel without flops has no roofline")
        total = sum(k["ms"] for k in kernels)
        check(abs(total - prof["kernel_sum_ms"]) <= 1e-3 * max(total, 1e-3),
              "kernel_sum_ms is the sum of the kernels' times")
        check(prof["kernel_sum_ms"] <= out["median_ms"] * 1.5 + 0.01,
              "the kernels' times (%.4f ms) are inside the runs (median %.4f ms)" %
              (prof["kernel_sum_ms"], out["median_ms"]))
        check(prof["peak_gflops"] > 0 and prof["peak_gbps"] > 0, "the peaks are measured")
        check(os.path.exists(os.path.join(tmp, "cache", "machine-peak.txt")),
              "the peaks are kept beside the object cache")
        with open(trace) as f:
            t = json.load(f)
        events = t.get("traceEvents", [])
        check(len(events) == len(kernels), "one trace event per kernel")
        check(all(e["ph"] == "X" and e["dur"] >= 0 for e in events), "complete events")
        check(all(events[i]["ts"] <= events[i + 1]["ts"] for i in range(len(events) - 1)),
              "events in launch order")
    # The table, with the peaks now from the cache.
    r = nnc(["bench", model, "--threads", "1", "--iterations", "5", "--profile"], env)
    check(r.returncode == 0 and "profile on cpu, 5 runs" in r.stdout and "[block/conv" in r.stdout
          and "memory    flops  bound" in r.stdout and ("memory " in r.stdout or
                                                        "compute" in r.stdout),
          "the table names the runs and the nodes: " + r.stdout + r.stderr)
    # The attention group: one kernel for the three nodes, rated by its GEMMs' flops.
    attn = os.path.join(tmp, "a.nir")
    with open(attn, "w") as f:
        f.write(ATTENTION)
    r = nnc(["bench", attn, "--threads", "1", "--iterations", "5", "--profile", "--json"], env)
    check(r.returncode == 0, "bench --profile of the attention model exits 0: " + r.stderr)
    if r.returncode == 0:
        ks = json.loads(r.stdout.strip().splitlines()[-1])["profile"]["kernels"]
        group = [k for k in ks if "attn/qk" in k["sources"]]
        check(len(group) == 1 and "attn/pv" in group[0]["sources"], "one attention kernel: %s" % ks)
        if group:
            check("gflops" in group[0] and group[0]["flops"] == 2 * 2 * 40 * 40 * (16 + 8),
                  "the attention kernel's flops: %s" % group[0])
    # The integer GEMM: GOP/s, its roofline at the int8 peak.
    qmodel = os.path.join(tmp, "q.nir")
    with open(qmodel, "w") as f:
        f.write(INTEGER)
    r = nnc(["bench", qmodel, "--threads", "1", "--iterations", "5", "--profile", "--json"], env)
    check(r.returncode == 0, "bench --profile of the integer model exits 0: " + r.stderr)
    if r.returncode == 0:
        prof = json.loads(r.stdout.strip().splitlines()[-1])["profile"]
        check(prof.get("peak_gops_int8", 0) > 0 and prof.get("peak_gflops_bf16", -1) >= 0,
              "the int8 peak is measured and the bf16 one present: %s" % prof)
        q = [k for k in prof["kernels"] if any(s.startswith("q/matmul") for s in k["sources"])]
        check(len(q) == 1 and q[0].get("operands") == "u8s8s32" and "gops" in q[0] and
              q[0]["flops"] == 2 * 16 * 64 * 32, "the integer GEMM reports GOP/s: %s" % q)
        if len(q) == 1 and prof.get("peak_gops_int8", 0) > 0:
            want_f = q[0]["flops"] / (prof["peak_gops_int8"] * 1e6)
            got = q[0].get("roofline", {}).get("flops_ms", -1)
            check(abs(got - want_f) <= 1e-6 + 1e-3 * want_f,
                  "the integer GEMM's roofline uses the int8 peak: %s" % q[0])
    r = nnc(["bench", qmodel, "--threads", "1", "--iterations", "2", "--profile"], env)
    check(r.returncode == 0 and "GOP/s u8 x s8" in r.stdout and "GOP/s  " in r.stdout,
          "the table names the int8 peak and rate: " + r.stdout + r.stderr)
    # bf16, where this CPU has the dot product.
    devices = nnc(["devices"], env).stdout
    if "avx512-bf16" in devices and "512-bit" in devices:
        r = nnc(["bench", model, "--threads", "1", "--iterations", "5", "--profile", "--json",
                 "--precision", "bf16"], env)
        check(r.returncode == 0, "bench --profile --precision bf16 exits 0: " + r.stderr)
        if r.returncode == 0:
            prof = json.loads(r.stdout.strip().splitlines()[-1])["profile"]
            mm = [k for k in prof["kernels"] if "head/matmul" in k["sources"]]
            check(prof.get("peak_gflops_bf16", 0) > 0 and len(mm) == 1 and
                  mm[0].get("operands") == "bf16", "the matmul runs bf16 tiles: %s" % mm)
            if len(mm) == 1 and prof.get("peak_gflops_bf16", 0) > 0:
                want_f = mm[0]["flops"] / (prof["peak_gflops_bf16"] * 1e6)
                got = mm[0].get("roofline", {}).get("flops_ms", -1)
                check(abs(got - want_f) <= 1e-6 + 1e-3 * want_f,
                      "the bf16 GEMM's roofline uses the bf16 peak: %s" % mm[0])
        # The note on bf16 slower than f32 comes from the kept peaks (a line per device and
        # thread count): rewritten with bf16 below f32 it is printed, above it is not.
        peaks = os.path.join(tmp, "cache", "machine-peak.txt")
        with open(peaks) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        key = lines[0].split("\t", 1)[1] if lines and "\t" in lines[0] else ""
        check(key != "", "the kept peaks have a fingerprint: %s" % lines)
        # Four figures and the measurement's version (2: the bandwidth read from written
        # memory); a line of another version is measured again, not read.
        check(bool(lines) and lines[0].split("\t")[0].split()[-1] == "2",
              "the kept peaks carry the measurement's version: %s" % lines)
        for bf16, noted in ((40.0, True), (200.0, False)):
            with open(peaks, "w") as f:
                f.write("100.000 20.000 400.000 %.3f 2\t%s\n" % (bf16, key))
            r = nnc(["bench", model, "--threads", "1", "--iterations", "2",
                     "--precision", "bf16"], env)
            has = "bf16 GEMM peaks at %.1f GFLOP/s, below its f32 peak of 100.0" % bf16 in r.stderr
            check(r.returncode == 0 and has == noted,
                  "bf16 peak %s: the slower-than-f32 note %s: %s" %
                  (bf16, "printed" if noted else "absent", r.stderr))
    else:
        print("note: no AVX512-BF16 on this CPU; the bf16 case is not run")
    r = nnc(["bench", model, "--target", "interp", "--trace", trace], env)
    check(r.returncode != 0 and "--trace" in r.stderr, "--trace on interp is refused: " + r.stderr)
    r = nnc(["bench", model, "--iterations", "2", "--trace", os.path.join(tmp, "no", "dir", "t.json")],
            env)
    check(r.returncode != 0 and "cannot write" in r.stderr, "an unwritable trace fails: " + r.stderr)

print("%d passed, %d failed" % (0 if failures else 1, len(failures)))
sys.exit(1 if failures else 0)
