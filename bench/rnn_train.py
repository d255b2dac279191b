#!/usr/bin/python3
"""`nnc train` on character-level LSTM and GRU language models against PyTorch eager.

The models (scripts/char_lm.py): Embedding(96, 64) -> 2-layer LSTM(256) -> Linear(96), and
the same with a 1-layer GRU, logits [N, 96, 64], exported from PyTorch with a dynamic batch, so
that nnc starts from PyTorch's own initial weights. Data: 64-character windows of the license
texts in /usr/share/common-licenses, labels the next characters, batches in file order.

1. Loss agreement: nnc train --optimizer adam --lr 0.001 --batch 32 --no-shuffle against
   PyTorch's Adam (eps 1e-8) on the same batches: the largest relative difference of the
   first --steps losses (bar: 1e-3).
2. Step time: median train step (forward + backward + update) of nnc and of PyTorch at 1 and 2
   threads, in the same run (bar: nnc at most 0.5x PyTorch's).

Writes rnn_train.md (table) and rnn_loss_curve.png to --out. Run with /usr/bin/python3 (Debian's
python3-torch and matplotlib).
Usage: bench/rnn_train.py [--nnc build/tools/nnc/nnc] [--out bench/results/train]
       [--steps 100] [--time-steps 12] [--models lstm,gru]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, report  # noqa: E402
sys.path.insert(0, os.path.join(nnc.ROOT, "scripts"))
char_lm = np = torch = None  # imported after the options are read, so --help needs no torch

SEQ = 64
BATCH = 32
LR = 1e-3
MODELS = {"lstm": ("LSTM: Embedding 64 -> 2-layer LSTM 256 -> Linear 96", dict(layers=2)),
          "gru": ("GRU: Embedding 64 -> 1-layer GRU 256 -> Linear 96", dict(layers=1))}


def step_gflop(key, layers, emb=64, hidden=256, vocab=None, seq=SEQ, batch=BATCH):
    """GEMM work of one train step: the forward matmuls (input projection and recurrent
    matmul of every layer and step, the output Linear) and, for each, the two of backward."""
    vocab = vocab or char_lm.VOCAB
    gates = 4 if key == "lstm" else 3
    rows = seq * batch
    flop, width = 0, emb
    for _ in range(layers):
        flop += 2 * rows * gates * hidden * (width + hidden)
        width = hidden
    flop += 2 * rows * hidden * vocab
    return 3 * flop / 1e9


def nnc_train(nnc_path, d, model_path, x, y, threads, extra=(), batch=BATCH):
    import numpy
    xp, yp = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
    numpy.save(xp, x)
    numpy.save(yp, y)
    return nnc.train(nnc_path, model_path, xp, yp, os.path.join(d, "out.onnx"), threads, batch,
                     LR, extra=extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--out", default=os.path.join(report.RESULTS, "train"))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--time-steps", type=int, default=12)
    ap.add_argument("--models", default="lstm,gru")
    args = ap.parse_args()
    global char_lm, np, torch
    import char_lm
    import numpy as np
    import torch
    os.makedirs(args.out, exist_ok=True)
    x, y = char_lm.license_windows(SEQ)
    lines = report.header(
        "nnc train vs PyTorch %s eager: character-level LSTM and GRU language models"
        % torch.__version__, machine.describe(args.nnc),
        python="/usr/bin/python3")
    lines += ["Shared with other jobs, timings noisy (medians of each run's steps, nnc and "
              "PyTorch measured back to back).", "",
             "Data: %d windows of %d characters of %s; batch %d in file order, Adam lr %g."
             % (len(x), SEQ, char_lm.LICENSES, BATCH, LR), ""]
    curves = {}
    agree, timing = [], []
    for key in args.models.split(","):
        title, sizes = MODELS[key]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, key + ".onnx")
            char_lm.export(char_lm.make_model(key, 0, **sizes), SEQ, path)
            # 1. Loss agreement over the first --steps batches.
            n = args.steps * BATCH
            ours = nnc_train(args.nnc, d, path, x[:n], y[:n], 1)
            theirs, _ = char_lm.torch_train(char_lm.make_model(key, 0, **sizes), x[:n], y[:n],
                                            BATCH, args.steps, LR, 1)
            a, b = np.asarray(ours["losses"][:args.steps]), np.asarray(theirs)
            rel = np.abs(a - b) / np.abs(b)
            curves[key] = (a, b)
            agree.append("| %s | %.6f / %.6f | %.6f / %.6f | %.2e | %s |" % (
                key.upper(), a[0], b[0], a[-1], b[-1], rel.max(),
                "PASS" if rel.max() <= 1e-3 else "FAIL"))
            print(agree[-1], flush=True)
            # 2. Step time, nnc then PyTorch at each thread count.
            n = args.time_steps * BATCH
            for threads in (1, 2):
                ours = nnc_train(args.nnc, d, path, x[:n], y[:n], threads)
                _, times = char_lm.torch_train(char_lm.make_model(key, 0, **sizes), x[:n],
                                               y[:n], BATCH, args.time_steps, LR, threads)
                t_nnc = ours["median_step_ms"]
                t_torch = float(np.median(times[2:]))
                gf = step_gflop(key, sizes["layers"])
                timing.append("| %s | %d | %.1f | %.1f | %.2f | %s | %.1f | %.0f / %.0f |" % (
                    key.upper(), threads, t_nnc, t_torch, t_nnc / t_torch,
                    "PASS" if t_nnc <= 0.5 * t_torch else "FAIL", gf, gf / t_nnc * 1e3,
                    gf / t_torch * 1e3))
                print(timing[-1], flush=True)
    lines += ["## Loss agreement (same initial weights and batches)", "",
              "| model | step 1 nnc / PyTorch | step %d nnc / PyTorch | max relative diff | "
              "bar 1e-3 |" % args.steps, "|---|---|---|---|---|"] + agree + [""]
    lines += ["## Median train step (forward + backward + Adam), batch %d, %d steps each"
              % (BATCH, args.time_steps), "",
              "| model | threads | nnc ms | PyTorch ms | nnc / PyTorch | bar 0.5 | GEMM GFLOP "
              "per step | GFLOP/s nnc / PyTorch |",
              "|---|---|---|---|---|---|---|---|"] + timing + [""]
    lines += [MODELS[k][0] for k in args.models.split(",")]
    with open(os.path.join(args.out, "rnn_train.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    char_lm.plot_loss_curves({k.upper(): c for k, c in curves.items()},
                             "char LMs on common-licenses, Adam lr 0.001, batch 32",
                             os.path.join(args.out, "rnn_loss_curve.png"))
    print("wrote", os.path.join(args.out, "rnn_train.md"))


if __name__ == "__main__":
    main()
