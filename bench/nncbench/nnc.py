"""nnc as the benchmarks run it: paths, the shared models, `nnc bench --json`, text-IR graphs."""

import os
import sys

from . import proc

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
SHARED = os.path.abspath(os.environ.get("NNC_SHARED", os.path.join(ROOT, "..", "shared")))
MODELS = os.path.join(SHARED, "models")
NNC = os.path.join(ROOT, "build", "tools", "nnc", "nnc")
NNC_EXEC = os.path.join(ROOT, "build", "tools", "nnc-exec", "nnc-exec")

# The six shared models (../shared/models) and, per model, timed runs and warmups per
# invocation: enough for a stable median, few enough for a shared 2-core host.
SIX_MODELS = ["mlp_b1", "mlp_b32", "lenet_b1", "lenet_b32", "resnet18_b1", "bert_layer_b1"]
ITERATIONS = {"mlp_b1": 300, "mlp_b32": 200, "lenet_b1": 300, "lenet_b32": 100,
              "resnet18_b1": 20, "bert_layer_b1": 20}
WARMUP = {"mlp_b1": 30, "mlp_b32": 20, "lenet_b1": 30, "lenet_b32": 10,
          "resnet18_b1": 3, "bert_layer_b1": 3}

# The default pipeline (passes/PassRegistry.cpp), which fusion.py and winograd.py vary.
DEFAULT_PIPELINE = [
    "shape-inference", "constant-fold", "canonicalize", "cse", "shape-inference",
    "constant-fold", "dce", "recognize-layer-norm", "recognize-rms-norm", "recognize-softmax",
    "fold-batch-norm", "dce", "layout-nchwc", "constant-fold", "cse", "dce", "winograd",
    "fuse-elementwise", "fuse-epilogue", "fuse-attention", "pack-gemm-weights", "dce"]


def command(nnc):
    """nnc as an argument list: a path, or a list already (a bundle's ld.so, its libraries
    and its nnc, as device.bundle_nnc makes it)."""
    return list(nnc) if isinstance(nnc, (list, tuple)) else [nnc]


def require(path, what="nnc", hint="scripts/build.sh"):
    """Ends the study with a clear message when `path` is not an executable."""
    if not os.access(path, os.X_OK):
        sys.exit("%s not found at %s (%s)" % (what, path, hint))


def bench_command(nnc, model, threads=None, iterations=None, warmup=None, extra=()):
    """The `nnc bench MODEL ... --json` command line."""
    cmd = command(nnc) + ["bench", model]
    for flag, value in (("--threads", threads), ("--iterations", iterations),
                        ("--warmup", warmup)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd + list(extra) + ["--json"]


def bench(nnc, model, threads=None, iterations=None, warmup=None, extra=(), env=None,
          timeout=None):
    """Runs `nnc bench --json`: (its report: median_ms, min_ms, compile_ms, kernels, and with
    --compare or --profile their fields; None) or (None, a one-line reason)."""
    return proc.run_json(bench_command(nnc, model, threads, iterations, warmup, extra), env,
                         timeout)


def bench_or_exit(*args, **kwargs):
    """bench(), ending the study on a failure (for studies where every figure is needed)."""
    report, err = bench(*args, **kwargs)
    if err:
        sys.exit("nnc bench %s: %s" % (args[1], err))
    return report


def matmul_graph(n):
    """Text IR of C = A x B on f32[n, n] operands (SGEMM n x n x n)."""
    t = "f32[%d,%d]" % (n, n)
    return ("graph @sgemm(%%a: %s, %%b: %s) -> (%s) {\n  %%c = matmul(%%a, %%b) : %s\n"
            "  return %%c\n}\n" % (t, t, t, t))


def model_files(folder):
    """(model.onnx, test_data_set_0) of a shared-model folder."""
    return os.path.join(folder, "model.onnx"), os.path.join(folder, "test_data_set_0")


def train(nnc, model, inputs, labels, output, threads, batch, lr, epochs=None,
          loss="softmax_cross_entropy", optimizer="adam", extra=()):
    """`nnc train ... --no-shuffle --json`, batches in file order as the PyTorch peers take
    them: its report (median_step_ms, median_step_cpu_ms, losses); a failure ends the study."""
    cmd = command(nnc) + ["train", model, "--inputs", inputs, "--labels", labels, "--loss", loss,
                          "--optimizer", optimizer, "--lr", str(lr), "--batch", str(batch)]
    if epochs is not None:
        cmd += ["--epochs", str(epochs)]
    cmd += ["--no-shuffle", "--threads", str(threads), "--output", output, "--json"] + list(extra)
    report, err = proc.run_json(cmd)
    if err:
        sys.exit("nnc train failed: %s" % err)
    return report
