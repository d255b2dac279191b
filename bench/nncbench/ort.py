"""The ONNX Runtime peer, run as its users run it: in its own process, with ORT's default
intra-op pool, whose idle threads spin.

In nnc's process (`nnc bench --compare ort`) ORT's spinning workers would take the cores that
nnc's next run needs, and with spinning off ORT is not what its users run. So a study starts
bench/ort/ort_bench.js (onnxruntime-node, which bench/ort's npm install brings) or, where node
is absent (a lent machine), bench/ort/ort_bench.py (the Python onnxruntime package): the same
options and the same JSON line. `spin="0"` turns spinning off, as an explicit variant."""

import os
import shutil
import sys

from . import proc
from .nnc import BENCH

NODE_SCRIPT = os.path.join(BENCH, "ort", "ort_bench.js")
PY_SCRIPT = os.path.join(BENCH, "ort", "ort_bench.py")
NODE_MODULE = os.path.join(BENCH, "ort", "node_modules", "onnxruntime-node")


class OrtPeer:
    """Times a model with ONNX Runtime in a process of its own, one JSON line per run:
    median_ms, min_ms, p90_ms, compile_ms (session creation), version, and
    max_abs_err_vs_output_0 when the inputs folder holds output_0.pb."""

    def __init__(self, runner="auto", spin=None, node="node", python=None):
        """runner: "node", "python" or "auto" (node when onnxruntime-node is installed, else
        Python's onnxruntime). spin: None (ORT's default, spinning), "0" or "1"."""
        self.spin = spin
        self.node = node
        self.python = python or sys.executable
        if runner == "auto":
            runner = "node" if self._node_ready() else "python"
        if runner not in ("node", "python"):
            raise ValueError("ORT runner %r: node, python or auto" % runner)
        self.runner = runner

    def _node_ready(self):
        return shutil.which(self.node) is not None and os.path.isdir(NODE_MODULE)

    def missing(self):
        """Why this peer cannot run here, or None when it can."""
        if self.runner == "node":
            if not self._node_ready():
                return ("onnxruntime-node is not installed (scripts/setup-bench.sh, or "
                        "`cd bench/ort && npm install --ignore-scripts`)")
            return None
        rc, _, err = proc.run([self.python, "-c", "import onnxruntime, numpy"])
        return None if rc == 0 else ("Python onnxruntime is not importable by %s: %s" %
                                     (self.python, proc.last_line(err)))

    def command(self, model, threads, iterations, warmup, inputs_dir=None, inputs=(),
                extra=()):
        """The peer's command line. inputs: NAME=FILE (.pb or .npy) strings, as nnc bench's
        --input takes them; inputs_dir: a folder of input_K.pb."""
        cmd = ([self.node, NODE_SCRIPT] if self.runner == "node" else [self.python, PY_SCRIPT])
        cmd += [model, "--threads", str(threads), "--iterations", str(iterations), "--warmup",
                str(warmup)]
        if inputs_dir:
            cmd += ["--inputs-dir", inputs_dir]
        for i in inputs:
            cmd += ["--input", i]
        if self.spin is not None:
            cmd += ["--spin", str(self.spin)]
        return cmd + list(extra)

    def run(self, *args, env=None, timeout=None, **kwargs):
        """Runs command(*args, **kwargs): (the JSON line as a dict, None) or (None, reason)."""
        return proc.run_json(self.command(*args, **kwargs), env, timeout)

    def describe(self, version=None):
        """One line for a result's header: which ORT, how it was run."""
        return "ONNX Runtime %s (%s, its own process, sequential, graph optimizations all, " \
               "intra-op allow_spinning %s)" % (
                   version or "?", "npm onnxruntime-node" if self.runner == "node"
                   else "Python onnxruntime", "ORT's default (1)" if self.spin is None
                   else self.spin)


def add_arguments(ap):
    """The ORT peer's options, the same in every study that has it."""
    ap.add_argument("--ort-runner", choices=["auto", "node", "python"], default="auto",
                    help="ONNX Runtime through node (bench/ort/ort_bench.js) or Python's "
                         "onnxruntime (bench/ort/ort_bench.py); auto: node when installed")
    ap.add_argument("--ort-spin", choices=["default", "0", "1"], default="default",
                    help="ORT's session.intra_op.allow_spinning (default: ORT's own, 1)")


def from_arguments(args):
    """The OrtPeer that add_arguments' options ask for."""
    return OrtPeer(args.ort_runner, None if args.ort_spin == "default" else args.ort_spin)
