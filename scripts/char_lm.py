"""Character-level language models for `nnc train` against PyTorch (needs torch and numpy).

Shared by bench/rnn_train.py and tests/cli/rnn_train_test.py: the license texts every Debian
machine has (/usr/share/common-licenses) as 96 character classes (newline, then printable
ASCII; any other byte counts as a space), cut into windows of SEQ characters whose labels are
the next characters; an Embedding -> LSTM/GRU -> Linear model with the logits as [N, vocab, T]
(the class axis second, as SoftmaxCrossEntropyLoss and CrossEntropyLoss want), exported to
ONNX with a dynamic batch; and PyTorch's own training of it (Adam, batches in order).
"""
import os
import time
import warnings

import numpy as np
import torch

LICENSES = "/usr/share/common-licenses"
VOCAB = 96


def char_classes(data):
    """Bytes -> class indices: '\\n' is 0, ' '..'~' are 1..95, anything else a space (1)."""
    b = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    out = np.where((b >= 32) & (b <= 126), b - 31, 1)
    return np.where(b == 10, 0, out)


def license_windows(seq, limit=None, folder=LICENSES):
    """(inputs, labels), both int64 [windows, seq]: consecutive windows of the license texts
    (files in name order, joined), labels the inputs shifted by one character."""
    data = b""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                data += f.read()
    c = char_classes(data)
    n = (len(c) - 1) // seq
    if limit is not None:
        n = min(n, limit)
    x = c[:n * seq].reshape(n, seq)
    y = c[1:n * seq + 1].reshape(n, seq)
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


class CharLM(torch.nn.Module):
    """Embedding(vocab, emb) -> `kind` ('lstm' or 'gru', batch-first, `layers` deep, hidden
    `hidden`) -> Linear(hidden, vocab), logits [N, vocab, T]."""

    def __init__(self, kind, vocab=VOCAB, emb=64, hidden=256, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, emb)
        cell = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        self.rnn = cell(emb, hidden, layers, batch_first=True)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        y, _ = self.rnn(self.emb(x))
        return self.out(y).permute(0, 2, 1)


def make_model(kind, seed, **sizes):
    torch.manual_seed(seed)
    return CharLM(kind, **sizes)


def export(model, seq, path):
    """The model as ONNX (opset 14) with input x int64 [N, seq] and output logits, N dynamic."""
    x = torch.zeros(2, seq, dtype=torch.int64)
    with warnings.catch_warnings():  # the exporter's notes on LSTM batch sizes and shapes
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                          opset_version=14,
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def torch_train(model, x, y, batch, steps, lr, threads):
    """Losses and per-step times (ms) of `steps` Adam steps (eps 1e-8) over the batches in
    order; trains `model` in place."""
    torch.set_num_threads(threads)
    opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-8)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    per_epoch = len(x) // batch
    losses, times = [], []
    for s in range(steps):
        b = s % per_epoch
        xb, yb = xt[b * batch:(b + 1) * batch], yt[b * batch:(b + 1) * batch]
        t = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
        losses.append(loss.item())
    return losses, times
