#!/usr/bin/env python3
"""`nnc tune` and the tuning cache through the CLI, on a small model built here.

Checks: a tune run fills the cache so that `nnc bench --cache --require-tuned` finds every
tunable kernel tuned (and the empty cache finds none); two tuners writing one cache at once
leave it valid and complete; `nnc bench --compare tuning:FILE` times the tuned configs against
the defaults, alternating; `--shape` tunes a model with symbolic dims at a shape; a tuner
killed with SIGKILL mid-run leaves a valid cache that the next tuner resumes; `nnc cache
ls|show|export --json|prune` read and manage it; a recurrent model (GRU: a loop whose body
holds its step's GEMM) is tuned, its loop body's kernel among the tuned ones.

Usage: tune_test.py NNC_BINARY
"""
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import model, node, tensor, value_info  # noqa: E402
from clitest import gru_model  # noqa: E402

NNC = sys.argv[1]


def build_model(rows=6):
    rnd = random.Random(5)
    w1 = [rnd.uniform(-1, 1) for _ in range(96 * 80)]
    w2 = [rnd.uniform(-1, 1) for _ in range(80 * 40)]
    nodes = [
        node("MatMul", ["x", "w1"], ["h"], "mm1"),
        node("Relu", ["h"], ["r"], "relu"),
        node("MatMul", ["r", "w2"], ["y"], "mm2"),
    ]
    return model(nodes, [value_info("x", [rows, 96])], [value_info("y", [rows, 40])],
                 [tensor("w1", [96, 80], w1), tensor("w2", [80, 40], w2)])


def run(args, env, check=True):
    p = subprocess.run([NNC] + args, capture_output=True, text=True, env=env, timeout=300)
    if check and p.returncode != 0:
        sys.exit(f"FAIL: nnc {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def integrity(db):
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def bench(model_path, db, env, require=False):
    args = ["bench", model_path, "--threads", "1", "--iterations", "3", "--json", "--cache", db]
    if require:
        args.append("--require-tuned")
    p = run(args, env, check=False)
    return p


def main():
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NNC_CACHE_DIR=os.path.join(tmp, "objects"))
        env.pop("NNC_TUNING_CACHE", None)
        path = os.path.join(tmp, "mlp.onnx")
        with open(path, "wb") as f:
            f.write(build_model())

        # An empty cache: nothing tuned, and --require-tuned refuses.
        empty = os.path.join(tmp, "empty.db")
        p = bench(path, empty, env)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        assert (j["tuned_kernels"], j["tunable_kernels"]) == (0, 2), j
        assert "tuned kernels: 0/2" in p.stderr, p.stderr
        p = bench(path, empty, env, require=True)
        assert p.returncode != 0 and "--require-tuned" in p.stderr, p.stderr

        # Two tuners at once on one cache.
        db = os.path.join(tmp, "tuning.db")
        tuners = [subprocess.Popen([NNC, "tune", path, "--threads", "1", "--budget", "6",
                                    "--trials", "4", "--cache", db, "-q"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                   text=True) for _ in range(2)]
        for t in tuners:
            out, err = t.communicate(timeout=300)
            assert t.returncode == 0, f"concurrent tuner failed:\n{out}\n{err}"
        assert integrity(db) == "ok"
        p = bench(path, db, env, require=True)
        assert p.returncode == 0, p.stderr
        j = json.loads(p.stdout)
        assert j["tuned_kernels"] == j["tunable_kernels"] == 2, j
        con = sqlite3.connect(db)
        rows = con.execute("SELECT COUNT(*), SUM(trials) FROM tuning").fetchone()
        con.close()
        assert rows[0] == 2 and rows[1] >= 2, rows

        # --compare tuning:FILE: the defaults (the empty cache) against the tuned configs,
        # alternating in one process; every peer kernel configured from FILE, the same outputs
        # up to rounding, the ratio of the two medians.
        p = run(["bench", path, "--threads", "1", "--iterations", "4", "--json", "--cache", empty,
                 "--compare", "tuning:" + db], env)
        j = json.loads(p.stdout)
        assert j["peer"] == "tuning" and j["peer_cache"] == db, j
        assert (j["tuned_kernels"], j["peer_tuned_kernels"]) == (0, 2), j
        assert j["peer_median_ms"] > 0, j
        assert abs(j["ratio"] - j["median_ms"] / j["peer_median_ms"]) <= 1e-3 * j["ratio"], j
        assert j["peer_max_abs_diff"] < 1e-2, j
        p = run(["bench", path, "--threads", "1", "--iterations", "2", "--compare", "tuning:" + db],
                env)
        assert "alternating" in p.stdout and "2 of 2 tunable kernels from it" in p.stdout, p.stdout
        missing = os.path.join(tmp, "missing.db")
        p = run(["bench", path, "--compare", "tuning:" + missing], env, check=False)
        assert p.returncode != 0 and f"tuning:{missing}: no such file" in p.stderr, p.stderr
        assert not os.path.exists(missing)

        # A model whose rows are symbolic is tuned at the shape --shape gives (its GEMMs'
        # signatures name 24 rows); an input it does not have, or a bad spec, is an error.
        dyn = os.path.join(tmp, "dyn.onnx")
        with open(dyn, "wb") as f:
            f.write(build_model("N"))
        p = run(["tune", dyn, "--shape", "x=24x96", "--threads", "1", "--budget", "4",
                 "--trials", "2", "--cache", os.path.join(tmp, "dyn.db"), "-q"], env)
        assert p.stdout.count(" m24 ") == 2, p.stdout
        p = run(["tune", dyn, "--shape", "z=24x96", "--cache", os.path.join(tmp, "dyn.db"), "-q"],
                env, check=False)
        assert p.returncode != 0 and "the model has no input 'z'" in p.stderr, p.stderr
        p = run(["tune", dyn, "--shape", "x=24by96", "--cache", os.path.join(tmp, "dyn.db"),
                 "-q"], env, check=False)
        assert p.returncode != 0 and "x=24by96" in p.stderr, p.stderr

        # A recurrent model: the tuner finds its loop body's GEMM too (it refused the model
        # before: "no CPU code generation for op 'scan'").
        gru = os.path.join(tmp, "gru.onnx")
        with open(gru, "wb") as f:
            f.write(gru_model())
        p = run(["tune", gru, "--threads", "1", "--budget", "4", "--trials", "2", "--cache",
                 os.path.join(tmp, "gru.db"), "-q"], env)
        assert "gemv_cpu f32 b1 m1 k64 n" in p.stdout, p.stdout

        # A tuner killed with SIGKILL mid-run leaves a valid cache; the next one resumes.
        killed = os.path.join(tmp, "killed.db")
        t = subprocess.Popen([NNC, "tune", path, "--threads", "1", "--budget", "60",
                              "--cache", killed, "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.2)
            if os.path.exists(killed):
                try:
                    con = sqlite3.connect(killed, timeout=30)
                    n = con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                    con.close()
                except sqlite3.OperationalError:
                    n = 0
                if n >= 2:
                    break
        os.kill(t.pid, signal.SIGKILL)
        t.wait()
        assert integrity(killed) == "ok"
        run(["cache", "ls", "--cache", killed], env)
        p = run(["tune", path, "--threads", "1", "--budget", "4", "--trials", "2", "--cache",
                 killed, "-q"], env)
        assert integrity(killed) == "ok"

        # The cache commands.
        p = run(["cache", "ls", "--cache", db], env)
        assert "2 records" in p.stdout and "gemm_cpu" in p.stdout, p.stdout
        p = run(["cache", "show", "m6 k96 n80", "--cache", db], env)
        assert "config" in p.stdout and "threads=1" in p.stdout, p.stdout
        p = run(["cache", "export", "--json", "--cache", db], env)
        recs = json.loads(p.stdout)
        assert len(recs) == 2 and all(r["kind"] == "gemm_cpu" for r in recs), recs
        p = run(["cache", "prune", "--cache", db], env)
        assert "removed 0 records" in p.stdout, p.stdout
        p = run(["cache", "prune", "--all", "--cache", db], env)
        assert "removed 2 records" in p.stdout, p.stdout
    print("PASS")


if __name__ == "__main__":
    main()
