#!/usr/bin/env python3
"""`nnc train` on a small PyTorch-exported language model against PyTorch's training.

lstm (default): Embedding(96, 16) -> LSTM(32) -> Linear(96); transformer: a 1-layer GPT block
with 2 heads, embedding 16 (scripts/char_lm.py TransformerLM, exported at opset 17 with every
parameter its own initializer). Logits [N, 96, 16], dynamic batch, on 16-character windows of
/usr/share/common-licenses; Adam lr 0.001, batch 8, batches in order, from the same initial
weights: each of the first 20 losses within 1e-3 (relative) of PyTorch's. Needs PyTorch and
numpy (Debian's python3-torch, for /usr/bin/python3); without them the test says so and is
skipped (77).

Usage: rnn_train_test.py NNC_BINARY [lstm|transformer]
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
    kind = sys.argv[2] if len(sys.argv) > 2 else "lstm"
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
    if kind == "transformer":
        sizes = dict(emb=16, heads=2, layers=1, seq=SEQ)
    else:
        sizes = dict(emb=16, hidden=32, layers=1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lm.onnx")
        if kind == "transformer":
            char_lm.export(char_lm.make_model(kind, 1, **sizes), SEQ, path, opset=17,
                           separate_params=True)
        else:
            char_lm.export(char_lm.make_model(kind, 1, **sizes), SEQ, path)
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
    theirs, _ = char_lm.torch_train(char_lm.make_model(kind, 1, **sizes), x, y, BATCH, STEPS,
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
