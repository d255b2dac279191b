#!/usr/bin/env python3
"""`nnc bench --compare ort`: ONNX Runtime loaded at run time beside nnc.

Always checked: with NNC_ORT_LIBRARY pointing nowhere, or at a library that is not ONNX
Runtime, the command fails with a clear message (naming what it tried) and a non-zero exit;
an unknown peer and a non-ONNX model are refused. When libonnxruntime.so is present (found by
nnc's own search: the loader path or bench/ort/node_modules, or NNC_ORT_LIBRARY set by the
caller), the happy path runs: both medians and the ratio are reported, and ONNX Runtime's
outputs agree with nnc's on the same inputs. Without the library that part is skipped, and
the test says so.

Usage: ort_compare_test.py NNC_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NNC = sys.argv[1]
MODEL = os.path.join(ROOT, "examples", "models", "tiny_cnn", "model.onnx")
INPUTS = os.path.join(ROOT, "examples", "models", "tiny_cnn", "test_data_set_0")


def run(args, env_update, cwd=None):
    env = dict(os.environ)
    env.setdefault("NNC_CACHE_DIR", tempfile.mkdtemp(prefix="nnc-ort-compare-cache-"))
    for k, v in env_update.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return subprocess.run([NNC] + args, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


def main():
    failures = []

    def expect(cond, what, p):
        if not cond:
            failures.append("%s\n  rc=%d\n  stdout: %s\n  stderr: %s" % (
                what, p.returncode, p.stdout.strip(), p.stderr.strip()))

    bench = ["bench", MODEL, "--inputs-dir", INPUTS, "--iterations", "3", "--warmup", "1"]

    missing = "/nonexistent/nnc-test/libonnxruntime.so.1"
    p = run(bench + ["--compare", "ort"], {"NNC_ORT_LIBRARY": missing})
    expect(p.returncode != 0 and p.returncode < 128, "missing library: non-zero exit", p)
    expect("ONNX Runtime is not installed" in p.stderr and missing in p.stderr,
           "missing library: the message says so and names the path tried", p)
    expect("Traceback" not in p.stderr and "Assertion" not in p.stderr,
           "missing library: no crash", p)

    # A shared library that is not ONNX Runtime (the C library itself).
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    if os.path.exists(libc):
        p = run(bench + ["--compare", "ort"], {"NNC_ORT_LIBRARY": libc})
        expect(p.returncode == 1 and "no OrtGetApiBase symbol" in p.stderr,
               "not ONNX Runtime: refused by its missing entry point", p)

    p = run(bench + ["--compare", "tvm"], {})
    expect(p.returncode == 1 and "unknown peer 'tvm'" in p.stderr, "unknown peer refused", p)

    with tempfile.TemporaryDirectory() as d:
        nir = os.path.join(d, "relu.nir")
        with open(nir, "w") as f:
            f.write("graph @g(%x: f32[4]) -> (f32[4]) {\n  %y = neg(%x) : f32[4]\n"
                    "  return %y\n}\n")
        p = run(["bench", nir, "--compare", "ort"], {"NNC_ORT_LIBRARY": missing})
        expect(p.returncode == 1 and "needs an .onnx model" in p.stderr,
               "a .nir model is refused for --compare ort", p)

    # The happy path, when ONNX Runtime is installed.
    env = {}
    if not os.environ.get("NNC_ORT_LIBRARY"):
        env["NNC_ORT_LIBRARY"] = None  # nnc's own search (from the repository root)
    p = run(bench + ["--compare", "ort", "--threads", "1", "--json"], env, cwd=ROOT)
    if p.returncode != 0 and "ONNX Runtime is not installed" in p.stderr:
        print("ort_compare: happy path SKIPPED (ONNX Runtime not installed; set "
              "NNC_ORT_LIBRARY or npm install in bench/ort)")
    else:
        expect(p.returncode == 0, "with ONNX Runtime: exit 0", p)
        if p.returncode == 0:
            r = json.loads(p.stdout)
            expect(r.get("peer") == "ort" and r["ort_median_ms"] > 0 and r["median_ms"] > 0,
                   "with ONNX Runtime: both medians reported", p)
            # The medians are printed to 0.1 us; the ratio is of the unrounded ones.
            lo = max(r["median_ms"] - 5e-5, 0) / (r["ort_median_ms"] + 5e-5)
            hi = (r["median_ms"] + 5e-5) / max(r["ort_median_ms"] - 5e-5, 1e-9)
            expect(lo * 0.999 <= r["ratio"] <= hi * 1.001,
                   "with ONNX Runtime: ratio = nnc / ort", p)
            expect(r["ort_max_abs_diff"] <= 1e-3,
                   "with ONNX Runtime: outputs agree with nnc's (max |diff| %s)" %
                   r.get("ort_max_abs_diff"), p)
            print("ort_compare: happy path ran (onnxruntime %s, nnc/ort %.3f, max |diff| %g)"
                  % (r["ort_version"], r["ratio"], r["ort_max_abs_diff"]))

    if failures:
        print("FAILED:\n" + "\n".join(failures))
        return 1
    print("ort_compare: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
