#!/usr/bin/env python3
"""`nnc tune --target opencl` and the tuning cache, on a small model built here.

On the first OpenCL device (PoCL in CI; skipped, exit 77, where there is none): with an empty
cache `nnc bench --target opencl` finds the model's tunable OpenCL kernels (a GEMM with its
epilogue, a plain GEMM, a work-group reduction) and none tuned; a tune run with a small budget
stores one record per tunable kernel under the device's OpenCL fingerprint, both OpenCL knob
spaces among them; a second compile (`bench --require-tuned`) takes every one of them; a second
tune run resumes (its candidates add to the first's, none measured twice); `nnc cache ls`
tags the records as OpenCL ones of this machine and `prune` keeps them; a recurrent model
(GRU: a loop whose body holds its step's GEMM) is tuned, its loop body's GEMM among the
tuned kernels.

Usage: tune_opencl_test.py NNC_BINARY
"""
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import attr_ints, model, node, tensor, value_info  # noqa: E402
from clitest import gru_model  # noqa: E402
from train_data import write_npy  # noqa: E402

NNC = sys.argv[1]


def build_model():
    rnd = random.Random(7)
    w1 = [rnd.uniform(-1, 1) for _ in range(96 * 80)]
    w2 = [rnd.uniform(-1, 1) for _ in range(80 * 40)]
    nodes = [
        node("MatMul", ["x", "w1"], ["h"], "mm1"),
        node("Relu", ["h"], ["r"], "relu"),
        node("MatMul", ["r", "w2"], ["y"], "mm2"),
        node("ReduceMean", ["r"], ["s"], "mean", [attr_ints("axes", [1])]),
    ]
    return model(nodes, [value_info("x", [6, 96])],
                 [value_info("y", [6, 40]), value_info("s", [6, 1])],
                 [tensor("w1", [96, 80], w1), tensor("w2", [80, 40], w2)])


def run(args, env, check=True):
    p = subprocess.run([NNC] + args, capture_output=True, text=True, env=env, timeout=600)
    if check and p.returncode != 0:
        sys.exit(f"FAIL: nnc {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def bench(path, db, env, require=False):
    args = ["bench", path, "--target", "opencl", "--iterations", "3", "--json", "--cache", db]
    if require:
        args.append("--require-tuned")
    return run(args, env, check=False)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NNC_CACHE_DIR=os.path.join(tmp, "objects"))
        env.pop("NNC_TUNING_CACHE", None)
        path = os.path.join(tmp, "mlp.onnx")
        with open(path, "wb") as f:
            f.write(build_model())

        empty = os.path.join(tmp, "empty.db")
        p = bench(path, empty, env)
        if p.returncode != 0 and "OpenCL" in p.stderr and "no " in p.stderr.lower():
            print("SKIP: no OpenCL device:", p.stderr.strip())
            sys.exit(77)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        tunable = j["tunable_kernels"]
        assert j["tuned_kernels"] == 0 and tunable == 3, j
        assert f"tuned kernels: 0/{tunable}" in p.stderr, p.stderr

        db = os.path.join(tmp, "tuning.db")
        p = run(["tune", path, "--target", "opencl", "--budget", "60", "--trials", "2",
                 "--cache", db, "-q"], env)
        assert f"{tunable} tunable kernels" in p.stdout, p.stdout
        con = sqlite3.connect(db)
        recs = con.execute("SELECT kind, signature, device, trials FROM tuning").fetchall()
        trials1 = con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        con.close()
        assert len(recs) == tunable, recs
        assert {r[0] for r in recs} == {"gemm_opencl", "reduce_opencl"}, recs
        assert all(r[2].startswith("opencl '") and " CUs | nnc " in r[2] for r in recs), recs
        assert any("epilogue" in r[1] for r in recs), recs
        assert trials1 > 0, trials1

        # A second compile takes every record.
        p = bench(path, db, env, require=True)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        assert j["tuned_kernels"] == j["tunable_kernels"] == tunable, j
        assert f"tuned kernels: {tunable}/{tunable}" in p.stderr, p.stderr
        x = os.path.join(tmp, "x.npy")
        write_npy(x, [random.Random(3).uniform(-1, 1) for _ in range(6 * 96)], [6, 96])
        p = run(["run", path, "--input", "x=" + x, "--target", "opencl", "--cache", db,
                 "--require-tuned", "--output-dir", os.path.join(tmp, "out")], env)
        assert f"tuned kernels: {tunable}/{tunable}" in p.stderr, p.stderr

        # A second run resumes: new candidates only.
        run(["tune", path, "--target", "opencl", "--budget", "60", "--trials", "2", "--cache",
             db, "-q"], env)
        con = sqlite3.connect(db)
        trials2 = con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        total = con.execute("SELECT SUM(trials) FROM tuning").fetchone()[0]
        con.close()
        assert trials2 > trials1 and total == trials2, (trials1, trials2, total)

        # The cache commands know OpenCL records as this machine's.
        p = run(["cache", "ls", "--cache", db], env)
        assert f"{tunable} records" in p.stdout and "(other device)" not in p.stdout, p.stdout
        assert p.stdout.count(" opencl ") == tunable, p.stdout
        p = run(["cache", "prune", "--cache", db], env)
        assert "removed 0 records" in p.stdout, p.stdout

        # A recurrent model: its loop body's GEMM is tuned too (the tuner refused the model
        # before: "no CPU code generation for op 'scan'").
        gru = os.path.join(tmp, "gru.onnx")
        with open(gru, "wb") as f:
            f.write(gru_model())
        p = run(["tune", gru, "--target", "opencl", "--budget", "20", "--trials", "2",
                 "--cache", os.path.join(tmp, "gru.db"), "-q"], env)
        assert "gemm_opencl f32 b1 m1 k64 n" in p.stdout, p.stdout
    print("PASS")


if __name__ == "__main__":
    main()
