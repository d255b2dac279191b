"""What the CLI tests (tests/cli/*_test.py) share: recording failures, running nnc, writing
input tensors, finding out whether the machine has an OpenCL device, and small models more
than one of them builds.

A test imports it after putting scripts/ on sys.path (for onnxw), checks with check(), and
ends with `return finish()` (or sys.exit(finish())): 1 when any check failed.
"""
import os
import random
import subprocess

from onnxw import attr_int, model, node, tensor, value_info

# TensorProto.DataType codes and the struct format of one element.
FLOAT, INT32, INT64, BOOL, DOUBLE = 1, 6, 7, 9, 11
_FORMAT = {FLOAT: "f", INT32: "i", INT64: "q", BOOL: "B", DOUBLE: "d"}

failures = []


def check(cond, what):
    """Records `what` as a failure (and prints it) unless `cond` holds."""
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def finish():
    """The exit status: 1 (with the count printed) when a check failed, else 0."""
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


def run(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def pb(d, name, dims, values, elem=FLOAT):
    """Writes tensor `name` as d/name.pb; returns nnc's arguments that feed it."""
    path = os.path.join(d, name + ".pb")
    write(path, tensor(name, dims, values, elem, _FORMAT[elem]))
    return ["--input", f"{name}={path}"]


def error_line(stderr):
    """The last non-empty line of a run's stderr (its error)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def targets(nnc, tmp):
    """["interp", "cpu"], and "opencl" when a one-op graph runs there; says when it skips."""
    probe = os.path.join(tmp, "probe.nir")
    write(probe, b"graph @p(%x: f32[2]) -> (f32[2]) {\n  %y = add(%x, %x) : f32[2]\n"
          b"  return %y\n}\n")
    r = run([nnc, "run", probe, "--target", "opencl", "-q"] + pb(tmp, "x", [2], [1.0, 2.0]))
    if r.returncode != 0:
        print(f"SKIP: the opencl parts (no OpenCL device: {error_line(r.stderr)})")
        return ["interp", "cpu"]
    return ["interp", "cpu", "opencl"]


def run_case(nnc, targets, path, args, expect, what, out_root, matches):
    """Runs model `path` with `args` on each target; output k (read_npy's (values, shape))
    must satisfy matches(output, expect[k])."""
    from train_data import read_npy
    for t in targets:
        out = os.path.join(out_root, f"out_{t}")
        r = run([nnc, "run", path, "--target", t, "-q", "--output-dir", out,
                 "--output-format", "npy"] + args)
        w = f"{what} --target {t}"
        check(r.returncode == 0, f"{w}: exit {r.returncode}: {r.stderr}")
        if r.returncode != 0:
            continue
        for k, e in enumerate(expect):
            got = read_npy(os.path.join(out, f"output_{k}.npy"))
            check(matches(got, e), f"{w}: output {k} is {got}, expected {e}")


def gru_model():
    """A GRU of hidden size 64 over 5 steps of 16 features (ONNX bytes): its step's GEMMs of
    one row by the recurrent weight run in the body of the loop it imports as."""
    rnd = random.Random(9)
    w = [rnd.uniform(-0.3, 0.3) for _ in range(3 * 64 * 16)]
    r = [rnd.uniform(-0.3, 0.3) for _ in range(3 * 64 * 64)]
    nodes = [node("GRU", ["x", "w", "r"], ["y", "yh"], "gru", [attr_int("hidden_size", 64)])]
    return model(nodes, [value_info("x", [5, 1, 16])],
                 [value_info("y", [5, 1, 1, 64]), value_info("yh", [1, 1, 64])],
                 [tensor("w", [1, 192, 16], w), tensor("r", [1, 192, 64], r)])
