#!/usr/bin/env python3
"""A QAT-style quantized model end to end through the nnc CLI.

Builds (scripts/onnxw.py) what a quantization-aware-trained export looks like at opset 13:
per-tensor uint8 QuantizeLinear/DequantizeLinear pairs on the activations, per-channel int8
weights dequantized along axis 0, around Conv + Relu, then a second Q/DQ pair and a MatMul
with per-tensor int8 weights. `nnc check` accepts it; `nnc run` on cpu and opencl (when there
is a device) gives the interpreter's outputs (the quantized output exactly but for a rare
round-half tie that a different f32 summation order moves by one step). Bad models (an
output_dtype that contradicts the zero point, a per-axis scale of the wrong length, blocks
that do not cover x) get one error line naming the node and a non-zero exit from `nnc check`
and `nnc run`, never a crash.

Usage: qdq_model_test.py NNC_BINARY
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnxw import attr_int, attr_ints, model, node, tensor, value_info  # noqa: E402
from train_data import write_npy  # noqa: E402

NNC = sys.argv[1]
UINT8, INT8 = 2, 3


def qdq_model(bad=None):
    rng = random.Random(5)
    wq = [rng.randint(-127, 127) for _ in range(4 * 3 * 3 * 3)]
    w_scale = [0.011, 0.023, 0.0057, 0.031]
    mq = [rng.randint(-127, 127) for _ in range(4 * 6 * 6 * 5)]
    w_axis = 0 if bad != "axis" else 1  # axis 1 has 3 channels, the scale has 4
    act_q = [attr_int("output_dtype", INT8)] if bad == "dtype" else []
    nodes = [
        node("QuantizeLinear", ["x", "s_in", "z_in"], ["xq"], "q_in", act_q),
        node("DequantizeLinear", ["xq", "s_in", "z_in"], ["xd"], "dq_in"),
        node("DequantizeLinear", ["wq", "s_w", "z_w"], ["wd"], "dq_w", [attr_int("axis", w_axis)]),
        node("Conv", ["xd", "wd", "b"], ["c"], "conv", [attr_ints("pads", [1, 1, 1, 1])]),
        node("Relu", ["c"], ["r"], "relu"),
        node("QuantizeLinear", ["r", "s_mid", "z_mid"], ["rq"], "q_mid"),
        node("DequantizeLinear", ["rq", "s_mid", "z_mid"], ["rd"], "dq_mid"),
        node("Reshape", ["rd", "shape"], ["flat"], "flatten"),
        node("DequantizeLinear", ["mq", "s_m", "z_m"], ["md"], "dq_m"),
        node("MatMul", ["flat", "md"], ["mm"], "matmul"),
        node("QuantizeLinear", ["mm", "s_out", "z_out"], ["yq"], "q_out"),
        node("DequantizeLinear", ["yq", "s_out", "z_out"], ["y"], "dq_out"),
    ]
    if bad == "block":
        # Opset 21 blocks of 4 along the 5 columns need 2 scales per row, not 3.
        nodes.append(node("DequantizeLinear", ["yq", "s_blk"], ["yb"], "dq_blk",
                          [attr_int("axis", 1), attr_int("block_size", 4)]))
    inits = [
        tensor("s_in", [], [0.02]),
        tensor("z_in", [], [128], data_type=UINT8, fmt="B"),
        tensor("wq", [4, 3, 3, 3], wq, data_type=INT8, fmt="b"),
        tensor("s_w", [4], w_scale),
        tensor("z_w", [4], [0, 0, 0, 0], data_type=INT8, fmt="b"),
        tensor("b", [4], [0.1, -0.05, 0.02, 0.0]),
        tensor("s_mid", [], [0.015]),
        tensor("z_mid", [], [0], data_type=UINT8, fmt="B"),
        tensor("shape", [2], [1, 4 * 6 * 6], data_type=7, fmt="q"),
        tensor("mq", [4 * 6 * 6, 5], mq, data_type=INT8, fmt="b"),
        tensor("s_m", [], [0.004]),
        tensor("z_m", [], [0], data_type=INT8, fmt="b"),
        tensor("s_out", [], [0.05]),
        tensor("z_out", [], [100], data_type=UINT8, fmt="B"),
        tensor("s_blk", [1, 3], [0.5, 0.5, 0.5]),
    ]
    outputs = [value_info("y", [1, 5]), value_info("yq", [1, 5], elem_type=UINT8),
               value_info("rq", [1, 4, 6, 6], elem_type=UINT8)]
    return model(nodes, [value_info("x", [1, 3, 6, 6])], outputs, inits,
                 opset=21 if bad == "block" else 13)


def read_npy(path):
    """(descr, flat values) of a little-endian .npy file of f4 or u1."""
    data = open(path, "rb").read()
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    descr = header.split("'descr':")[1].split("'")[1]
    body = data[10 + hlen:]
    code = {"<f4": "f", "|u1": "B"}[descr]
    return descr, list(struct.unpack("<%d%s" % (len(body) // struct.calcsize(code), code), body))


def run(args):
    r = subprocess.run([NNC] + args, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "qdq.onnx")
        with open(path, "wb") as f:
            f.write(qdq_model())
        rc, out = run(["check", path])
        if rc != 0 or "unsupported" in out:
            failures.append(f"nnc check refused the Q/DQ model (exit {rc}):\n{out}")
        rng = random.Random(11)
        x = os.path.join(d, "x.npy")
        write_npy(x, [rng.uniform(-2.5, 2.5) for _ in range(3 * 6 * 6)], [1, 3, 6, 6])
        results = {}
        targets = ["interp", "cpu"]
        rc, out = run(["devices"])
        if any(line.startswith("opencl:") for line in out.splitlines()):
            targets.append("opencl")
        else:
            print("no OpenCL device: the opencl target is not checked")
        for t in targets:
            o = os.path.join(d, "out_" + t)
            rc, out = run(["run", path, "--input", "x=" + x, "--target", t, "--output-dir", o,
                           "--output-format", "npy"])
            if rc != 0:
                failures.append(f"nnc run --target {t} failed (exit {rc}):\n{out}")
                continue
            results[t] = [read_npy(os.path.join(o, f"output_{k}.npy")) for k in range(3)]
        want = results.get("interp")
        for t, got in results.items():
            if t == "interp" or not want:
                continue
            for k, ((wd, wv), (gd, gv)) in enumerate(zip(want, got)):
                if wd != gd or len(wv) != len(gv):
                    failures.append(f"{t} output {k}: {gd}[{len(gv)}], interp {wd}[{len(wv)}]")
                    continue
                step = [0.05, 1, 1][k]  # one quantization step of each output
                diff = [i for i in range(len(wv)) if wv[i] != gv[i]]
                far = [i for i in diff if abs(wv[i] - gv[i]) > step * 1.0001]
                if far or len(diff) > max(1, len(wv) // 50):
                    failures.append(f"{t} output {k}: {len(diff)} of {len(wv)} elements differ "
                                    f"from the interpreter's, {len(far)} by more than a step "
                                    f"(first: {[(i, gv[i], wv[i]) for i in diff[:4]]})")
            # The model is not trivial: the quantized outputs are not all one value.
        if want and len(set(want[1][1])) < 2:
            failures.append(f"the quantized output is constant: {want[1][1]}")

        for bad, what in [("dtype", "'q_in'"), ("axis", "'dq_w'"), ("block", "'dq_blk'")]:
            bpath = os.path.join(d, f"bad_{bad}.onnx")
            with open(bpath, "wb") as f:
                f.write(qdq_model(bad))
            for cmd in (["check", bpath], ["run", bpath, "--input", "x=" + x, "--target", "cpu"]):
                rc, out = run(cmd)
                if rc <= 0 or rc >= 128 or what not in out or "Assertion" in out:
                    failures.append(f"nnc {cmd[0]} on the {bad} model: exit {rc}, wanted a "
                                    f"clear error naming {what}:\n{out}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"ok: Q/DQ model on {', '.join(sorted(results))}; 3 bad models refused")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
