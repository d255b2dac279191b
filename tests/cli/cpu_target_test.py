#!/usr/bin/env python3
"""The CPU target's user-visible promises, through the nnc CLI, on the shared models:

- `nnc inspect --plan --json`: the arena peak is at most 1.10 times the lower bound on
  ResNet-18 and the BERT layer, and the output is byte-identical across runs;
- a second `nnc run` of a model is served from the compile cache (the log says so and the
  compile time drops);
- a model whose shapes depend on its data (Compress) runs and matches its expected output.

Usage: cpu_target_test.py NNC SHARED_DIR. Exits 77 (skipped) when SHARED_DIR has no models.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return p


def main():
    nnc, shared = sys.argv[1], sys.argv[2]
    models = os.path.join(shared, "models")
    if not os.path.isdir(os.path.join(models, "resnet18_b1")):
        print(f"SKIP: no shared models in {models}")
        return 77
    failures = []

    for name in ("resnet18_b1", "bert_layer_b1"):
        model = os.path.join(models, name, "model.onnx")
        first = run([nnc, "inspect", model, "--plan", "--json"]).stdout
        second = run([nnc, "inspect", model, "--plan", "--json"]).stdout
        plan = json.loads(first)
        ratio = plan["peak_bytes"] / plan["lower_bound_bytes"]
        print(f"{name}: peak {plan['peak_bytes']} lower bound {plan['lower_bound_bytes']} "
              f"ratio {ratio:.3f} unplanned {plan['unplanned_bytes']}")
        if ratio > 1.10:
            failures.append(f"{name}: peak/lower bound {ratio:.3f} > 1.10")
        if first != second:
            failures.append(f"{name}: the plan differs between two runs")

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NNC_CACHE_DIR=cache)
        model_dir = os.path.join(models, "lenet_b1")
        cmd = [nnc, "run", os.path.join(model_dir, "model.onnx"), "--inputs-dir",
               os.path.join(model_dir, "test_data_set_0"), "--expected-dir",
               os.path.join(model_dir, "test_data_set_0")]
        logs = run(cmd, env).stdout + run(cmd, env).stdout
        found = re.findall(r"compile ([0-9.]+) ms.*compile cache: (hit|miss)", logs)
        print("lenet_b1 compile (ms, cache):", found)
        if [c for _, c in found] != ["miss", "hit"]:
            failures.append(f"lenet_b1: expected a cache miss then a hit, got {found}")
        elif float(found[1][0]) >= float(found[0][0]):
            failures.append(f"lenet_b1: the cached compile was not faster: {found}")

    node = os.path.join(shared, "onnx-tests", "node", "test_compress_0")
    if os.path.isdir(node):
        data = os.path.join(node, "test_data_set_0")
        out = run([nnc, "run", os.path.join(node, "model.onnx"), "--inputs-dir", data,
                   "--expected-dir", data]).stdout
        if "outputs match" not in out:
            failures.append(f"test_compress_0: {out}")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
