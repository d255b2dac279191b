#!/usr/bin/env python3
"""Compiles and runs racing on one object cache and one tuning cache, as separate processes.

A tuner (`nnc tune`) writes the tuning cache while four `nnc run` processes compile the same
model (built here) into one empty object cache (NNC_CACHE_DIR) and read configs from that
tuning cache, all started together; then four more runs find every object in the cache. Every
run must end with outputs within ONNX's tolerance of the model's expected outputs (checked by
`nnc run --expected-dir`), and the cache must hold only whole object files (no temporaries).
The same races within one process are the Concurrency.* unit tests.

Usage: cache_race_test.py NNC_BINARY
"""
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import model, node, tensor, value_info  # noqa: E402

NNC = sys.argv[1]
RUNS = 4


def matmul(a, b, n, k, m):
    return [sum(a[i * k + t] * b[t * m + j] for t in range(k)) for i in range(n) for j in range(m)]


def main():
    rnd = random.Random(18)
    n, k, h, m = 6, 48, 40, 24
    x = [rnd.uniform(-1, 1) for _ in range(n * k)]
    w1 = [rnd.uniform(-1, 1) for _ in range(k * h)]
    w2 = [rnd.uniform(-1, 1) for _ in range(h * m)]
    hid = [max(0.0, v) for v in matmul(x, w1, n, k, h)]
    y = matmul(hid, w2, n, h, m)
    onnx = model([node("MatMul", ["x", "w1"], ["h"], "mm1"), node("Relu", ["h"], ["r"], "relu"),
                  node("MatMul", ["r", "w2"], ["y"], "mm2")],
                 [value_info("x", [n, k])], [value_info("y", [n, m])],
                 [tensor("w1", [k, h], w1), tensor("w2", [h, m], w2)])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.onnx")
        with open(path, "wb") as f:
            f.write(onnx)
        inputs, expected = os.path.join(tmp, "in"), os.path.join(tmp, "expected")
        os.makedirs(inputs)
        os.makedirs(expected)
        with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
            f.write(tensor("x", [n, k], x))
        with open(os.path.join(expected, "output_0.pb"), "wb") as f:
            f.write(tensor("y", [n, m], y))
        objects, db = os.path.join(tmp, "objects"), os.path.join(tmp, "tuning.db")
        env = dict(os.environ, NNC_CACHE_DIR=objects)
        run = [NNC, "run", path, "--inputs-dir", inputs, "--expected-dir", expected,
               "--cache", db, "--threads", "2"]
        tune = [NNC, "tune", path, "--cache", db, "--budget", "3", "--trials", "4", "-q"]

        def start_all(with_tuner):
            procs = [subprocess.Popen(tune, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)] if with_tuner else []
            procs += [subprocess.Popen(run, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True) for _ in range(RUNS)]
            failures = []
            for p in procs:
                out, _ = p.communicate(timeout=600)
                if p.returncode != 0:
                    failures.append(f"{' '.join(p.args[:2])} exited {p.returncode}:\n{out}")
            return failures, procs

        failures, _ = start_all(with_tuner=True)
        failures += start_all(with_tuner=False)[0]
        leftovers = [f for f in os.listdir(objects) if not f.endswith((".o", ".idx"))]
        if leftovers:
            failures.append(f"temporaries left in the object cache: {leftovers}")
        if not any(f.endswith(".o") for f in os.listdir(objects)):
            failures.append("the object cache is empty")
        if failures:
            print("\n".join(failures))
            sys.exit(1)
        print(f"cache_race: 1 tuner and {RUNS} runs at once, then {RUNS} cached runs: all "
              "within tolerance; the object cache holds only whole objects")


if __name__ == "__main__":
    main()
