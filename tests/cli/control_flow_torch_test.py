#!/usr/bin/env python3
"""A TorchScript model with data-dependent control flow, exported by PyTorch, against PyTorch.

The scripted model runs a loop whose trip count is an input (ONNX Loop, its body indexing x at
the iteration number) and then branches on the sign of the result's sum (ONNX If, whose two
branches give different shapes: [4] and [8]). Exported at opset 13, it runs with
`nnc run` on interp, cpu and opencl (where a device is found) for inputs that take each branch
and two trip counts; each output must equal PyTorch's within 1e-5. Needs PyTorch (for
/usr/bin/python3); without it the test says so and is skipped (77).

Usage: control_flow_torch_test.py NNC_BINARY
"""
import os
import subprocess
import sys
import tempfile


def main():
    nnc = sys.argv[1]
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"SKIP: needs PyTorch and numpy ({e})")
        return 77

    class Model(torch.nn.Module):
        def forward(self, x, n):
            acc = torch.zeros_like(x[0])
            for i in range(int(n)):
                acc = acc * 0.5 + x[i % 3]
            if bool(acc.sum() > 0):
                z = acc * 2
            else:
                z = torch.cat([acc, acc], 0)
            return z

    torch.manual_seed(0)
    failures = []
    with tempfile.TemporaryDirectory(prefix="nnc-cf-torch-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        x = torch.randn(3, 4)
        torch.onnx.export(torch.jit.script(Model()), (x, torch.tensor(5)), path,
                          opset_version=13, input_names=["x", "n"], output_names=["z"])
        targets = ["interp", "cpu", "opencl"]
        for sign in [1.0, -1.0]:
            for trips in [2, 5]:
                xx, n = x.abs() * sign, torch.tensor(trips)
                want = Model()(xx, n).numpy()
                d = os.path.join(tmp, f"{sign}_{trips}")
                os.makedirs(d)
                np.save(os.path.join(d, "x.npy"), xx.numpy())
                np.save(os.path.join(d, "n.npy"), n.numpy())
                for t in list(targets):
                    out = os.path.join(d, "out_" + t)
                    r = subprocess.run([nnc, "run", path, "--target", t, "-q", "--input",
                                        "x=" + os.path.join(d, "x.npy"), "--input",
                                        "n=" + os.path.join(d, "n.npy"), "--output-dir", out,
                                        "--output-format", "npy"],
                                       capture_output=True, text=True, timeout=600)
                    what = f"sign {sign}, {trips} trips, --target {t}"
                    if r.returncode != 0 and t == "opencl" and "OpenCL" in r.stderr:
                        print(f"SKIP: opencl ({r.stderr.strip().splitlines()[-1]})")
                        targets.remove("opencl")
                        continue
                    if r.returncode != 0:
                        failures.append(f"{what}: exit {r.returncode}: {r.stderr}")
                        continue
                    got = np.load(os.path.join(out, "output_0.npy"))
                    if got.shape != want.shape or float(np.abs(got - want).max()) > 1e-5:
                        failures.append(f"{what}: got {got.shape} {got.ravel()[:6]}, "
                                        f"want {want.shape} {want.ravel()[:6]}")
                print(f"ok: sign {sign}, {trips} trips ({', '.join(targets)})")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
