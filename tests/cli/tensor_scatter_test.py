#!/usr/bin/env python3
"""TensorScatter-24 (the KV-cache update) and MelWeightMatrix-17 through the nnc CLI.

TensorScatter with the write positions a graph input: linear writes inside the cache and
circular writes that wrap past its end give the answer computed here on interp, cpu and
opencl; a linear write past the end (write index + sequence length > max_sequence_length)
and a negative write index make `nnc run` exit 1 with the index error naming the node, never
a silent partial write. MelWeightMatrix with inputs that would reach past the spectrogram
(the upper edge above the Nyquist frequency) is refused at import with the bin it reaches.
OpenCL parts run where a device is found (PoCL in CI) and say so when skipped.

Usage: tensor_scatter_test.py NNC_BINARY
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import attr_string, model, node, tensor, value_info  # noqa: E402
from train_data import read_npy  # noqa: E402

from clitest import FLOAT, INT32, INT64, check, pb, run, write  # noqa: E402
import clitest  # noqa: E402

NNC = sys.argv[1]
B, MAX, S, D = 2, 5, 2, 3  # batch, max_sequence_length, update length, head size


def scatter_model(mode):
    n = node("TensorScatter", ["past", "update", "widx"], ["present"], "kv_update",
             [attr_string("mode", mode)])
    return model([n], [value_info("past", [B, MAX, D]), value_info("update", [B, S, D]),
                       value_info("widx", [B], INT64)],
                 [value_info("present", [B, MAX, D])], opset=24)


def mel_model():
    n = node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["m"], "mel")
    inits = [tensor("bins", [], [4], INT32, "i"), tensor("dft", [], [16], INT32, "i"),
             tensor("rate", [], [8000], INT32, "i"), tensor("lo", [], [0.0]),
             tensor("hi", [], [20000.0])]  # far above the Nyquist frequency of 4000 Hz
    return model([n], [], [value_info("m", [9, 4])], inits, opset=17)


def answer(past, upd, widx, circular):
    y = list(past)
    for b in range(B):
        for s in range(S):
            pos = widx[b] + s
            if circular or pos < 0:
                pos %= MAX
            for d in range(D):
                y[(b * MAX + pos) * D + d] = upd[(b * S + s) * D + d]
    return y


def main():
    past = [float(v) for v in range(B * MAX * D)]
    upd = [100.0 + v for v in range(B * S * D)]
    with tempfile.TemporaryDirectory(prefix="nnc-tensor-scatter-") as tmp:
        targets = clitest.targets(NNC, tmp)
        # A negative linear position counts from the end, as the spec's numpy pseudocode
        # indexes; one below -max_sequence_length is out of range.
        cases = [("linear", [0, 3], None), ("circular", [4, 3], None), ("linear", [-1, 0], None),
                 ("linear", [4, 0], "out of range"), ("linear", [0, -7], "out of range")]
        for k, (mode, widx, error) in enumerate(cases):
            d = os.path.join(tmp, f"case{k}")
            os.makedirs(d)
            path = os.path.join(d, "m.onnx")
            write(path, scatter_model(mode))
            args = pb(d, "past", [B, MAX, D], past) + pb(d, "update", [B, S, D], upd)
            args += pb(d, "widx", [B], widx, INT64)
            for t in targets:
                out = os.path.join(d, f"out_{t}")
                r = run([NNC, "run", path, "--target", t, "-q", "--output-dir", out,
                         "--output-format", "npy"] + args)
                w = f"TensorScatter {mode} write_indices {widx} --target {t}"
                if error:
                    check(r.returncode == 1, f"{w}: exit {r.returncode}, not 1")
                    check(error in r.stderr and "kv_update" in r.stderr,
                          f"{w}: stderr lacks '{error}' or the node name: {r.stderr!r}")
                    continue
                check(r.returncode == 0, f"{w}: exit {r.returncode}: {r.stderr}")
                if r.returncode == 0:
                    got, _ = read_npy(os.path.join(out, "output_0.npy"))
                    want = answer(past, upd, widx, mode == "circular")
                    check(list(got) == want, f"{w}: {list(got)}, expected {want}")
        print(f"ok: TensorScatter linear, circular and out-of-range writes ({', '.join(targets)})")

        path = os.path.join(tmp, "mel.onnx")
        write(path, mel_model())
        r = run([NNC, "check", path])
        check(r.returncode == 1, f"MelWeightMatrix past Nyquist: nnc check exit {r.returncode}")
        check("outside the 9 bins" in r.stderr and "mel" in r.stderr,
              f"MelWeightMatrix past Nyquist: stderr {r.stderr!r}")
        print("ok: MelWeightMatrix reaching past the spectrogram is refused")
    return clitest.finish()


if __name__ == "__main__":
    sys.exit(main())
