#!/usr/bin/env python3
"""`nnc train` on a small PyTorch-exported LSTM language model against PyTorch's training.

Embedding(96, 16) -> LSTM(32) -> Linear(96), logits [N, 96, 16], dynamic batch, on 16-character
windows of /usr/share/common-licenses (scripts/char_lm.py); Adam lr 0.001, batch 8, batches in
order, from the same initial weights: each of the first 20 losses within 1e-3 (relative) of
PyTorch's. Needs PyTorch and numpy (Debian's python3-torch, for /usr/bin/python3); without them
the test says so and is skipped (77).

Usage: rnn_train_test.py NNC_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

STEPS, BATCH, SEQ = 20, 8, 16


def main():
    nnc = sys.argv[1]
    try:
        import numpy as np
        import char_lm
    except ImportError as e:
        print("SKIP: %s (PyTorch and numpy are needed: Debian's python3-torch)" % e)
        return 77
    if not os.path.isdir(char_lm.LICENSES):
        print("SKIP: no %s" % char_lm.LICENSES)
        return 77
    x, y = char_lm.license_windows(SEQ, limit=STEPS * BATCH)
    sizes = dict(emb=16, hidden=32, layers=1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lm.onnx")
        char_lm.export(char_lm.make_model("lstm", 1, **sizes), SEQ, path)
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "y.npy"), y)
        r = subprocess.run(
            [nnc, "train", path, "--inputs", os.path.join(d, "x.npy"), "--labels",
             os.path.join(d, "y.npy"), "--loss", "softmax_cross_entropy", "--optimizer", "adam",
             "--lr", "0.001", "--batch", str(BATCH), "--no-shuffle", "--threads", "1",
             "--output", os.path.join(d, "out.onnx"), "--json"],
            capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: nnc train exited %d:\n%s" % (r.returncode, r.stderr))
            return 1
        ours = json.loads(r.stdout)["losses"]
    theirs, _ = char_lm.torch_train(char_lm.make_model("lstm", 1, **sizes), x, y, BATCH, STEPS,
                                    1e-3, 1)
    if len(ours) != STEPS:
        print("FAIL: nnc train gave %d losses, expected %d" % (len(ours), STEPS))
        return 1
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
    print("losses nnc %s\n       torch %s" % (["%.5f" % v for v in ours[:5]],
                                              ["%.5f" % v for v in theirs[:5]]))
    print("largest relative difference over %d steps: %.2e (bar 1e-3)" % (STEPS, worst))
    if not worst <= 1e-3:
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
