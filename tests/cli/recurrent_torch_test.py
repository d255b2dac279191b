#!/usr/bin/env python3
"""PyTorch-exported recurrent models (ONNX LSTM/GRU) against PyTorch's own outputs.

Exports, with random weights from a fixed seed and opset 13: a batch-first 2-layer LSTM
(input 64, hidden 256), a 1-layer GRU and a bidirectional LSTM, each with a dynamic batch dim
and a dynamic sequence length; runs them with `nnc run` on the CPU (batch 3 of 16 steps, and
batch 5 of 9 steps on the same file) and checks every output (Y, h_n, c_n) against PyTorch's: max error <= 1e-4 of the output's
range. Needs PyTorch (Debian's python3-torch, for /usr/bin/python3); without it the test says
so and is skipped (77).

Usage: recurrent_torch_test.py NNC_BINARY [--target cpu|opencl|interp] [--keep DIR]
"""
import os
import subprocess
import sys
import tempfile

SEQ = 16


def models():
    import torch

    class Rnn(torch.nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.cell = cell

        def forward(self, x):
            y, state = self.cell(x)
            return (y,) + (tuple(state) if isinstance(state, tuple) else (state,))

    return {
        "lstm_2layer_batch_first": (
            Rnn(torch.nn.LSTM(64, 256, num_layers=2, batch_first=True)), 64, True),
        "gru_1layer": (Rnn(torch.nn.GRU(64, 128)), 64, False),
        "lstm_bidirectional": (
            Rnn(torch.nn.LSTM(32, 64, bidirectional=True, batch_first=True)), 32, True),
    }


def export(name, model, inputs, batch_first, folder):
    import torch
    path = os.path.join(folder, name + ".onnx")
    x = torch.randn(3, SEQ, inputs) if batch_first else torch.randn(SEQ, 3, inputs)
    batch_axis = 0 if batch_first else 1
    seq_axis = 1 - batch_axis
    with torch.no_grad():
        n_out = len(model(x))
    names = ["y", "h_n", "c_n"][:n_out]
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=names,
                      opset_version=13,
                      dynamic_axes={"x": {batch_axis: "batch", seq_axis: "seq"}})
    return path, batch_axis


def main():
    nnc = sys.argv[1]
    target = "cpu"
    keep = None
    args = sys.argv[2:]
    while args:
        if args[0] == "--target":
            target, args = args[1], args[2:]
        elif args[0] == "--keep":
            keep, args = args[1], args[2:]
        else:
            print("unknown argument", args[0])
            return 2
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("SKIPPED: PyTorch is not installed for %s (%s)" % (sys.executable, e))
        return 77
    torch.manual_seed(0)
    folder = keep or tempfile.mkdtemp(prefix="nnc-recurrent-")
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("NNC_CACHE_DIR", os.path.join(folder, "cache"))
    failures = []
    for name, (model, inputs, batch_first) in models().items():
        model.eval()
        path, batch_axis = export(name, model, inputs, batch_first, folder)
        for batch, seq in ((3, SEQ), (5, 9)):
            shape = [seq, seq, inputs]
            shape[batch_axis] = batch
            x = torch.randn(*shape)
            with torch.no_grad():
                want = [t.numpy() for t in model(x)]
            xin = os.path.join(folder, "%s_x%d.npy" % (name, batch))
            out = os.path.join(folder, "%s_out%d" % (name, batch))
            np.save(xin, x.numpy())
            p = subprocess.run([nnc, "run", path, "--input", "x=" + xin, "--output-dir", out,
                                "--output-format", "npy", "--target", target, "-q"],
                               capture_output=True, text=True, env=env, timeout=600)
            if p.returncode != 0:
                failures.append("%s batch %d: nnc run failed: %s" % (name, batch,
                                                                      p.stderr.strip()))
                continue
            for k, w in enumerate(want):
                got = np.load(os.path.join(out, "output_%d.npy" % k))
                if got.shape != w.shape:
                    failures.append("%s batch %d output %d: shape %s, PyTorch's %s" % (
                        name, batch, k, got.shape, w.shape))
                    continue
                span = float(w.max() - w.min()) or 1.0
                err = float(np.abs(got.astype(np.float64) - w).max()) / span
                print("%-26s batch %d output %d: max error %.2e of the range" % (
                    name, batch, k, err))
                if err > 1e-4:
                    failures.append("%s batch %d output %d: error %.2e of the range > 1e-4" % (
                        name, batch, k, err))
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
