#!/usr/bin/env python3
"""ONNX Runtime peer through its Python package, for machines without node (a lent machine):
the options and the JSON line of ort_bench.js, so that a study runs either.

    python3 ort_bench.py MODEL.onnx [--threads N] [--iterations K] [--warmup W]
                         [--input [NAME=]FILE ...] [--inputs-dir DIR] [--spin 0|1]
                         [--profile FILE.json] [--output-dir DIR]

Session options: graph optimizations all, intra_op_num_threads N, inter_op_num_threads 1,
sequential execution. Inputs: input_<i>.pb in --inputs-dir, or --input NAME=FILE (.pb or .npy;
FILE alone for a single-input model); without them, random normal data of the model's input
shapes (symbolic dims taken as 1). --spin sets session.intra_op.allow_spinning (ORT's default
is 1); without it the entry is left at ORT's default. --profile writes ORT's own per-node
profile of the timed runs, {node: {"mean": ms, "min": ms, "op": type}}, to FILE.json.
--output-dir writes each output of one untimed run as DIR/output_<k>.npy.
Needs numpy and onnxruntime (onnx too for .pb inputs).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nncbench.stats import percentile, time_calls  # noqa: E402


def load_tensor(path):
    import numpy as np
    if path.endswith(".npy"):
        return "", np.load(path)
    import onnx
    from onnx import numpy_helper
    t = onnx.load_tensor(path)
    return t.name, numpy_helper.to_array(t)


def node_profile(events, skip):
    """Per node, the mean and min of its "<node>_kernel_time" events after the first `skip`
    runs (the warmups)."""
    per, ops = {}, {}
    suffix = "_kernel_time"
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith(suffix):
            n = e["name"][:-len(suffix)]
            per.setdefault(n, []).append(e["dur"] / 1e3)
            ops[n] = e.get("args", {}).get("op_name")
    return {n: {"mean": statistics.mean(v[skip:] or v), "min": min(v[skip:] or v), "op": ops[n]}
            for n, v in per.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input", action="append", default=[], help="[NAME=]FILE (.pb or .npy)")
    ap.add_argument("--inputs-dir")
    ap.add_argument("--spin", choices=["0", "1"])
    ap.add_argument("--profile", help="write ORT's per-node profile to this .json")
    ap.add_argument("--output-dir", help="write one run's outputs here as output_<k>.npy")
    a = ap.parse_args()
    if a.iterations < 1:
        ap.error("--iterations must be at least 1")
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if a.spin is not None:
        so.add_session_config_entry("session.intra_op.allow_spinning", a.spin)
    if a.profile:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="ort-profile-"), "ort")
    t0 = time.perf_counter()
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    create_ms = (time.perf_counter() - t0) * 1e3
    names = [i.name for i in s.get_inputs()]

    feed = {}
    if a.input:
        for i, spec in enumerate(a.input):
            name, eq, path = spec.partition("=")
            if not eq or "/" in name:
                name, path = "", spec
            stored, x = load_tensor(path)
            want = name or (stored if stored in names else names[i])
            if want not in names:
                sys.exit("ort_bench: --input %s: the model has no input %r (inputs: %s)" %
                         (spec, want, ", ".join(names)))
            feed[want] = x
        if len(feed) != len(names):
            sys.exit("ort_bench: model has %d inputs, --input gave %d" % (len(names), len(feed)))
    elif a.inputs_dir:
        for i, n in enumerate(names):
            stored, x = load_tensor(os.path.join(a.inputs_dir, "input_%d.pb" % i))
            feed[stored if stored in names else n] = x
    else:
        rng = np.random.default_rng(0)
        for i in s.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            feed[i.name] = rng.standard_normal(shape).astype(np.float32)

    out = {"model": a.model, "peer": "ort", "runner": "onnxruntime (python)",
           "version": ort.__version__, "threads": a.threads,
           "allow_spinning": "default" if a.spin is None else a.spin,
           "iterations": a.iterations, "warmup": a.warmup,
           "compile_ms": round(create_ms, 3)}
    # Against output_0.pb of the inputs folder: a check that the inputs were read right.
    ref = os.path.join(a.inputs_dir or "", "output_0.pb")
    check = None
    if a.inputs_dir and not a.input and os.path.exists(ref):
        want = load_tensor(ref)[1]
        got = s.run(None, feed)[0]
        if got.size != want.size:
            sys.exit("ort_bench: output has %d values, output_0.pb has %d" % (got.size, want.size))
        check = float(np.abs(got.reshape(-1) - want.reshape(-1)).max())
    if a.output_dir:
        os.makedirs(a.output_dir, exist_ok=True)
        for k, y in enumerate(s.run(None, feed)):
            np.save(os.path.join(a.output_dir, "output_%d.npy" % k), np.asarray(y))
    times = sorted(time_calls(lambda: s.run(None, feed), a.iterations, a.warmup))
    out.update({"median_ms": round(statistics.median(times), 4),
                "p90_ms": round(percentile(times, 0.9), 4), "min_ms": round(times[0], 4),
                "mean_ms": round(statistics.mean(times), 4)})
    if check is not None:
        out["max_abs_err_vs_output_0"] = check
    if a.profile:
        with open(s.end_profiling()) as f:
            events = json.load(f)
        with open(a.profile, "w") as f:
            json.dump(node_profile(events, a.warmup + (check is not None) + bool(a.output_dir)), f)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
