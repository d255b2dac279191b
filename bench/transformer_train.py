#!/usr/bin/python3
"""`nnc train` on a 2-layer transformer language model against PyTorch eager.

The model (scripts/char_lm.py TransformerLM, RustyFlow's size): token and learned position
embeddings of 128, 2 pre-norm GPT blocks with 4 heads (causal additive mask, softmax
attention, exact GELU MLP of 512), LayerNorm, Linear(96); sequence 64, batch 16; exported from
PyTorch (opset 17) with a dynamic batch, so that nnc starts from PyTorch's own initial weights.
Data: 64-character windows of /usr/share/common-licenses, labels the next characters, batches
in file order.

1. Loss agreement: nnc train --optimizer adam --lr 0.001 --batch 16 --no-shuffle against
   PyTorch's Adam (eps 1e-8) on the same batches: the largest relative difference of the
   first --steps losses (bar: 1e-3).
2. Step time: median train step (forward + backward + Adam) of nnc and of PyTorch at 1 and 2
   threads, measured back to back, --rounds times (bar: nnc at most 0.5x PyTorch's). The
   process CPU time per step is reported beside the wall time: on a shared machine it leaves
   out the time other jobs held the cores.

Writes transformer_train.md and transformer_loss_curve.png to --out. Run with /usr/bin/python3
(Debian's python3-torch and matplotlib).
Usage: bench/transformer_train.py [--nnc build/tools/nnc/nnc] [--out bench/results/train]
       [--steps 100] [--time-steps 20] [--threads 1,2]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, report  # noqa: E402
from rnn_train import nnc_train  # noqa: E402  (it puts scripts/ on the path for char_lm)
char_lm = np = torch = None  # imported after the options are read, so --help needs no torch

SEQ, BATCH, LR = 64, 16, 1e-3
EMB, HEADS, LAYERS = 128, 4, 2


def step_gflop(emb=EMB, layers=LAYERS, vocab=None, seq=SEQ, batch=BATCH):
    """Matmul work of one train step: per layer the qkv, output, and two MLP projections and
    the two attention products; the output Linear; backward does twice the forward's."""
    vocab = vocab or char_lm.VOCAB
    rows = seq * batch
    flop = layers * (2 * rows * emb * (3 * emb + emb + 4 * emb + 4 * emb)
                     + 2 * 2 * batch * seq * seq * emb)
    flop += 2 * rows * emb * vocab
    return 3 * flop / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--out", default=os.path.join(report.RESULTS, "train"))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--time-steps", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    global char_lm, np, torch
    import char_lm
    import numpy as np
    import torch
    os.makedirs(args.out, exist_ok=True)
    x, y = char_lm.license_windows(SEQ)
    make = lambda: char_lm.make_model("transformer", 0, emb=EMB, heads=HEADS, layers=LAYERS,
                                      seq=SEQ)
    lines = report.header(
        "nnc train vs PyTorch %s eager: 2-layer transformer language model" % torch.__version__,
        machine.describe(args.nnc), python="/usr/bin/python3")
    lines += ["Shared with other jobs, timings noisy (medians of each run's steps, nnc and "
              "PyTorch measured back to back).", "",
             "Model: embedding %d, %d layers, %d heads, sequence %d, vocabulary %d (%d "
             "parameters). Data: %d windows of %s; batch %d in file order, Adam lr %g."
             % (EMB, LAYERS, HEADS, SEQ, char_lm.VOCAB,
                sum(p.numel() for p in make().parameters()), len(x), char_lm.LICENSES, BATCH,
                LR), ""]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "transformer.onnx")
        char_lm.export(make(), SEQ, path, opset=17, separate_params=True)
        # 1. Loss agreement over the first --steps batches.
        n = args.steps * BATCH
        ours = nnc_train(args.nnc, d, path, x[:n], y[:n], 1, batch=BATCH)
        theirs, _ = char_lm.torch_train(make(), x[:n], y[:n], BATCH, args.steps, LR, 1)
        a, b = np.asarray(ours["losses"][:args.steps]), np.asarray(theirs)
        rel = np.abs(a - b) / np.abs(b)
        lines += ["## Loss agreement (same initial weights and batches)", "",
                  "| step | nnc | PyTorch | relative diff |", "|---|---|---|---|"]
        for s in sorted({0, 1, 9, 49, args.steps - 1}):
            lines.append("| %d | %.6f | %.6f | %.2e |" % (s + 1, a[s], b[s], rel[s]))
        lines += ["", "Largest relative difference over the first %d steps: %.2e at step %d "
                  "(bar 1e-3): %s" % (args.steps, rel.max(), int(rel.argmax()) + 1,
                                      "PASS" if rel.max() <= 1e-3 else "FAIL"), ""]
        print("\n".join(lines[-10:]), flush=True)
        # 2. Step time, nnc then PyTorch at each thread count.
        timing = []
        n = args.time_steps * BATCH
        gf = step_gflop()
        for threads, r in [(int(t), r) for r in range(args.rounds)
                           for t in args.threads.split(",")]:
            ours = nnc_train(args.nnc, d, path, x[:n], y[:n], threads, batch=BATCH)
            cpu = []
            _, times = char_lm.torch_train(make(), x[:n], y[:n], BATCH, args.time_steps, LR,
                                           threads, cpu)
            t_nnc, c_nnc = ours["median_step_ms"], ours["median_step_cpu_ms"]
            t_torch, c_torch = float(np.median(times[2:])), float(np.median(cpu[2:]))
            timing.append("| %d | %d | %.1f | %.1f | %.2f | %s | %.1f | %.1f | %.2f | %.0f / %.0f |"
                          % (r + 1, threads, t_nnc, t_torch, t_nnc / t_torch,
                             "PASS" if t_nnc <= 0.5 * t_torch else "FAIL", c_nnc, c_torch,
                             c_nnc / c_torch, gf / t_nnc * 1e3, gf / t_torch * 1e3))
            print(timing[-1], flush=True)
    lines += ["## Median train step (forward + backward + Adam), batch %d, %d steps each"
              % (BATCH, args.time_steps), "",
              "| round | threads | nnc ms | PyTorch ms | nnc / PyTorch | bar 0.5 | nnc CPU ms | "
              "PyTorch CPU ms | CPU nnc / PyTorch | GFLOP/s nnc / PyTorch (%.2f GFLOP of "
              "matmul per step) |" % gf,
              "|---|---|---|---|---|---|---|---|---|---|"] + timing + ["",
              "CPU ms: the process's CPU time per step (all its threads), which leaves out "
              "the time other jobs held the cores; at 1 thread it is the cleaner comparison "
              "on a loaded machine.", ""]
    with open(os.path.join(args.out, "transformer_train.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    char_lm.plot_loss_curves({"": (a, b)},
                             "2-layer transformer LM on common-licenses, Adam lr 0.001, batch 16",
                             os.path.join(args.out, "transformer_loss_curve.png"))
    print("wrote", os.path.join(args.out, "transformer_train.md"))


if __name__ == "__main__":
    main()
