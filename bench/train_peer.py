#!/usr/bin/python3
"""`nnc train` against PyTorch eager: loss agreement and step time.

1. Loss agreement: the MLP 64-128-10 on the digits' 80% split (scripts/train_data.py), the
   same initial weights, batches in file order (--no-shuffle, last partial batch dropped),
   Adam lr 0.001 (eps 1e-8), batch 32: nnc's and PyTorch's losses of the first 100 steps and
   their largest relative difference (bar: 1e-3).
2. Step time: median train step (forward + backward + update) of nnc and of PyTorch at 1 and
   2 threads, for the digits MLP (batch 32), an MLP 784-512-256-10 and LeNet-5 on random data
   (batch 64). nnc's median includes its first step, which compiles (a median ignores it).

Writes a markdown table (and loss_curve.png when matplotlib is there) to --out. Needs Debian's
python3-torch and python3-sklearn; run with /usr/bin/python3 (it has torch).
Usage: bench/train_peer.py [--nnc build/tools/nnc/nnc] [--out bench/results/train]
"""
import argparse
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, report  # noqa: E402
sys.path.insert(0, os.path.join(nnc.ROOT, "scripts"))
# Imported after the options are read, so that --help needs no torch.
char_lm = td = np = torch = None


def torch_mlp(sizes, layers):
    mods = []
    for i, (w, b) in enumerate(layers):
        lin = torch.nn.Linear(sizes[i], sizes[i + 1])
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(w, dtype=torch.float32).reshape(sizes[i + 1], sizes[i]))
            lin.bias.copy_(torch.tensor(b, dtype=torch.float32))
        mods.append(lin)
        if i != len(layers) - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def torch_lenet(params):
    F = torch.nn
    net = F.Sequential(F.Conv2d(1, 6, 5, padding=2), F.ReLU(), F.MaxPool2d(2),
                       F.Conv2d(6, 16, 5), F.ReLU(), F.MaxPool2d(2), F.Flatten(),
                       F.Linear(400, 120), F.ReLU(), F.Linear(120, 84), F.ReLU(),
                       F.Linear(84, 10))
    layers = [net[0], net[3], net[7], net[9], net[11]]
    with torch.no_grad():
        for i, lay in enumerate(layers):
            (_, wd, wv), (_, bd, bv) = params[2 * i], params[2 * i + 1]
            lay.weight.copy_(torch.tensor(wv, dtype=torch.float32).reshape(wd))
            lay.bias.copy_(torch.tensor(bv, dtype=torch.float32))
    return net


def torch_train(sizes, layers, x, y, batch, steps, lr, threads):
    """Losses and per-step times of `steps` Adam steps over batches in order (wrapping), by
    char_lm.torch_train. `sizes` None: LeNet-5 with `layers` = lenet5_params."""
    net = torch_lenet(layers) if sizes is None else torch_mlp(sizes, layers)
    return char_lm.torch_train(net, x, y, batch, steps, lr, threads)


def nnc_train(nnc_path, d, sizes, layers, x, y, batch, epochs, lr, threads):
    model = os.path.join(d, "model.onnx")
    with open(model, "wb") as f:
        f.write(td.lenet5_model(layers) if sizes is None else td.mlp_model(sizes, layers))
    xp, yp = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
    np.save(xp, np.asarray(x, dtype=np.float32))
    np.save(yp, np.asarray(y, dtype=np.int64))
    return nnc.train(nnc_path, model, xp, yp, os.path.join(d, "out.onnx"), threads, batch, lr,
                     epochs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--out", default=os.path.join(report.RESULTS, "train"))
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    global char_lm, td, np, torch
    import char_lm
    import numpy as np
    import torch
    import train_data as td
    os.makedirs(args.out, exist_ok=True)
    xs, ys = td.load_digits()
    xtr, ytr, _, _ = td.split(xs, ys)
    xtr = np.asarray(xtr, dtype=np.float32)
    ytr = np.asarray(ytr, dtype=np.int64)
    lines = report.header("nnc train vs PyTorch %s eager" % torch.__version__,
                          machine.describe(args.nnc), python="/usr/bin/python3")
    lines += ["Shared with other jobs, timings noisy (medians).", ""]

    # 1. Loss agreement.
    sizes = [64, 128, 10]
    layers = td.init_mlp(sizes, seed=0)
    per_epoch = len(xtr) // 32
    epochs = (args.steps + per_epoch - 1) // per_epoch
    with tempfile.TemporaryDirectory() as d:
        ours = nnc_train(args.nnc, d, sizes, layers, xtr, ytr, 32, epochs, 1e-3, 1)
    theirs, _ = torch_train(sizes, layers, xtr, ytr, 32, args.steps, 1e-3, 1)
    a = np.asarray(ours["losses"][:args.steps])
    b = np.asarray(theirs)
    rel = np.abs(a - b) / np.abs(b)
    lines += ["## Loss agreement (digits MLP 64-128-10, Adam lr 0.001, batch 32, same init and "
              "batch order)", "",
              "| step | nnc | PyTorch | relative diff |", "|---|---|---|---|"]
    for s in [0, 1, 9, 49, args.steps - 1]:
        lines.append("| %d | %.6f | %.6f | %.2e |" % (s + 1, a[s], b[s], rel[s]))
    lines += ["", "Largest relative difference over the first %d steps: %.2e (bar 1e-3): %s"
              % (args.steps, rel.max(), "PASS" if rel.max() <= 1e-3 else "FAIL"), ""]
    print("\n".join(lines[-8:]))

    # 2. Step time.
    lines += ["## Median step (forward + backward + Adam update)", "",
              "| model | batch | threads | nnc ms | PyTorch ms | nnc / PyTorch |",
              "|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    cases = [("MLP 64-128-10 (digits)", sizes, layers, xtr, ytr, 32)]
    big = [784, 512, 256, 10]
    cases.append(("MLP 784-512-256-10", big, td.init_mlp(big, seed=1),
                  rng.random((64 * 40, 784), dtype=np.float32),
                  rng.integers(0, 10, 64 * 40).astype(np.int64), 64))
    cases.append(("LeNet-5", None, td.lenet5_params(seed=2),
                  rng.random((64 * 12, 1, 28, 28), dtype=np.float32),
                  rng.integers(0, 10, 64 * 12).astype(np.int64), 64))
    for name, sz, ly, x, y, batch in cases:
        for threads in (1, 2):
            with tempfile.TemporaryDirectory() as d:
                ours = nnc_train(args.nnc, d, sz, ly, x, y, batch, 3, 1e-3, threads)
            _, times = torch_train(sz, ly, x, y, batch, 3 * (len(x) // batch), 1e-3, threads)
            t_torch = float(np.median(times[5:]))
            lines.append("| %s | %d | %d | %.3f | %.3f | %.2f |" % (
                name, batch, threads, ours["median_step_ms"], t_torch,
                ours["median_step_ms"] / t_torch))
            print(lines[-1])
    with open(os.path.join(args.out, "train_peer.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    char_lm.plot_loss_curves({"": (a, b)}, "digits MLP 64-128-10, Adam lr 0.001, batch 32",
                             os.path.join(args.out, "loss_curve.png"))
    print("wrote", os.path.join(args.out, "train_peer.md"))


if __name__ == "__main__":
    random.seed(0)
    main()
