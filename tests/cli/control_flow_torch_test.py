#!/usr/bin/env python3
"""TorchScript models with data-dependent control flow, exported by PyTorch, against PyTorch.

The scripted model runs a loop whose trip count is an input (ONNX Loop, its body indexing x at
the iteration number) and then branches on the sign of the result's sum (ONNX If, whose two
branches give different shapes: [4] and [8]). Exported at opset 13, it runs with
`nnc run` on interp, cpu and opencl (where a device is found) for inputs that take each branch
and two trip counts; each output must equal PyTorch's within 1e-5. A second scripted model
iterates a layer while its result is large (a Python while loop: an ONNX Loop whose body
computes its condition, capped at 50 steps), for inputs that stop it before the first step,
after a few and at the cap; its result and its step count must equal PyTorch's. A third one
appends to Python lists in such a while loop and in a loop over an input's count (ONNX Loops
carrying sequences, their lengths known only at run time) and returns the lists stacked and
concatenated, the first's length and last element. Needs PyTorch (for /usr/bin/python3);
without it the test says so and is skipped (77).

Usage: control_flow_torch_test.py NNC_BINARY
"""
import os
import subprocess
import sys
import tempfile
from typing import List


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

    class WhileModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, limit):
            y, i = x, 0
            while bool(y.abs().max() > limit) and i < 50:
                y = torch.tanh(self.lin(y)) * 0.9
                i += 1
            return y, torch.tensor(i)

    class ListModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, limit, n):
            y, i = x, 0
            ys = [x]
            while bool(y.abs().max() > limit) and i < 50:
                y = torch.tanh(self.lin(y)) * 0.9
                ys.append(y)
                i += 1
            zs: List[torch.Tensor] = [x[0]]
            for j in range(int(n)):
                zs.append(x[1] * float(j))
            return (torch.stack(ys, 0), torch.cat(ys, 1), torch.tensor(len(ys)), ys[-1],
                    torch.stack(zs, 1))

    torch.manual_seed(0)
    failures = []
    targets = ["interp", "cpu", "opencl"]

    def run(path, d, inputs, wants, what):
        """`nnc run` of `path` on each target, the inputs saved in d; each output within 1e-5
        of its want."""
        args = []
        for name, value in inputs.items():
            np.save(os.path.join(d, name + ".npy"), value)
            args += ["--input", f"{name}={os.path.join(d, name + '.npy')}"]
        for t in list(targets):
            out = os.path.join(d, "out_" + t)
            r = subprocess.run([nnc, "run", path, "--target", t, "-q", "--output-dir", out,
                                "--output-format", "npy"] + args,
                               capture_output=True, text=True, timeout=600)
            w = f"{what}, --target {t}"
            if r.returncode != 0 and t == "opencl" and "OpenCL" in r.stderr:
                print(f"SKIP: opencl ({r.stderr.strip().splitlines()[-1]})")
                targets.remove("opencl")
                continue
            if r.returncode != 0:
                failures.append(f"{w}: exit {r.returncode}: {r.stderr}")
                continue
            for k, want in enumerate(wants):
                got = np.load(os.path.join(out, f"output_{k}.npy"))
                if got.shape != want.shape or float(np.abs(got - want).max()) > 1e-5:
                    failures.append(f"{w}: output {k}: got {got.shape} {got.ravel()[:6]}, "
                                    f"want {want.shape} {want.ravel()[:6]}")
        print(f"ok: {what} ({', '.join(targets)})")

    with tempfile.TemporaryDirectory(prefix="nnc-cf-torch-") as tmp:
        path = os.path.join(tmp, "while.onnx")
        m = WhileModel()
        x = torch.randn(2, 8) * 3
        torch.onnx.export(torch.jit.script(m), (x, torch.tensor(0.5)), path, opset_version=13,
                          input_names=["x", "limit"], output_names=["y", "steps"])
        for limit in [10.0, 0.5, 0.0]:  # no step, a few, the cap of 50
            lim = torch.tensor(limit)
            with torch.no_grad():
                want = [v.numpy() for v in m(x, lim)]
            d = os.path.join(tmp, f"while_{limit}")
            os.makedirs(d)
            run(path, d, {"x": x.numpy(), "limit": lim.numpy()}, want,
                f"while loop, limit {limit}: {int(want[1])} steps")

        path = os.path.join(tmp, "lists.onnx")
        m = ListModel()
        x = torch.randn(2, 8) * 3
        torch.onnx.export(torch.jit.script(m), (x, torch.tensor(0.5), torch.tensor(3)), path,
                          opset_version=13, input_names=["x", "limit", "n"])
        for limit, n in [(10.0, 0), (0.5, 3), (0.0, 1)]:  # no step, a few, the cap of 50
            lim, nn = torch.tensor(limit), torch.tensor(n)
            with torch.no_grad():
                want = [v.numpy() for v in m(x, lim, nn)]
            d = os.path.join(tmp, f"lists_{limit}_{n}")
            os.makedirs(d)
            run(path, d, {"x": x.numpy(), "limit": lim.numpy(), "n": nn.numpy()}, want,
                f"lists appended to in loops, limit {limit}, n {n}: {int(want[2])} and "
                f"{n + 1} elements")

        path = os.path.join(tmp, "model.onnx")
        x = torch.randn(3, 4)
        torch.onnx.export(torch.jit.script(Model()), (x, torch.tensor(5)), path,
                          opset_version=13, input_names=["x", "n"], output_names=["z"])
        for sign in [1.0, -1.0]:
            for trips in [2, 5]:
                xx, n = x.abs() * sign, torch.tensor(trips)
                d = os.path.join(tmp, f"{sign}_{trips}")
                os.makedirs(d)
                run(path, d, {"x": xx.numpy(), "n": n.numpy()}, [Model()(xx, n).numpy()],
                    f"sign {sign}, {trips} trips")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
