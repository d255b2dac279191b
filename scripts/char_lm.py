"""Character-level language models for `nnc train` against PyTorch (needs torch and numpy).

Shared by bench/rnn_train.py and tests/cli/rnn_train_test.py: the license texts every Debian
machine has (/usr/share/common-licenses) as 96 character classes (newline, then printable
ASCII; any other byte counts as a space), cut into windows of SEQ characters whose labels are
the next characters; an Embedding -> LSTM/GRU -> Linear model, or a small GPT-style transformer,
with the logits as [N, vocab, T]
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


class Block(torch.nn.Module):
    """A pre-norm GPT block: x + attention(ln(x)), then x + MLP(ln(x)) with exact (erf) GELU.
    The attention is written out (one qkv Linear, causal additive mask, softmax) so that the
    export is plain MatMul/Softmax/Transpose/Reshape; dropout is left out (p = 0)."""

    def __init__(self, emb, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(emb)
        self.qkv = torch.nn.Linear(emb, 3 * emb)
        self.proj = torch.nn.Linear(emb, emb)
        self.ln2 = torch.nn.LayerNorm(emb)
        self.fc1 = torch.nn.Linear(emb, 4 * emb)
        self.fc2 = torch.nn.Linear(4 * emb, emb)
        mask = torch.triu(torch.full((seq, seq), -1e9), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        n, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.reshape(n, t, self.heads, d).transpose(1, 2)
        k = k.reshape(n, t, self.heads, d).transpose(1, 2)
        v = v.reshape(n, t, self.heads, d).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(2, 3) * (1.0 / d ** 0.5) + self.mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, c)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class TransformerLM(torch.nn.Module):
    """Token and learned position embeddings -> `layers` GPT blocks -> LayerNorm -> Linear,
    logits [N, vocab, T] (RustyFlow's size by default: 2 layers, 4 heads, embedding 128)."""

    def __init__(self, vocab=VOCAB, emb=128, heads=4, layers=2, seq=64):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, emb)
        self.pos = torch.nn.Parameter(torch.randn(seq, emb) * 0.02)
        self.blocks = torch.nn.Sequential(*[Block(emb, heads, seq) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(emb)
        self.out = torch.nn.Linear(emb, vocab)

    def forward(self, x):
        h = self.blocks(self.tok(x) + self.pos)
        return self.out(self.ln(h)).permute(0, 2, 1)


def make_model(kind, seed, **sizes):
    """kind 'lstm', 'gru' or 'transformer'."""
    torch.manual_seed(seed)
    if kind == "transformer":
        return TransformerLM(**sizes)
    return CharLM(kind, **sizes)


def export(model, seq, path, opset=14, separate_params=False):
    """The model as ONNX with input x int64 [N, seq] and output logits, N dynamic (opset 17
    exports LayerNorm as LayerNormalization). An eval-mode export merges initializers of equal
    value (every LayerNorm's ones and zeros would become one shared parameter);
    `separate_params` exports in training mode without constant folding, which keeps each
    parameter its own initializer (the model must have no dropout or batch norm)."""
    x = torch.zeros(2, seq, dtype=torch.int64)
    mode = torch.onnx.TrainingMode.TRAINING if separate_params else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():  # the exporter's notes on LSTM batch sizes and shapes
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                          opset_version=opset, training=mode,
                          do_constant_folding=not separate_params,
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def torch_train(model, x, y, batch, steps, lr, threads, cpu_times=None):
    """Losses and per-step times (ms) of `steps` Adam steps (eps 1e-8) over the batches in
    order; trains `model` in place. A list `cpu_times` gets each step's process CPU time (ms),
    which on a shared machine leaves out the time other jobs held the cores.

    `threads` bounds torch's own pool and also the BLAS pool its matmuls run on:
    torch.set_num_threads does not bound Debian's OpenBLAS, whose 2 threads made a
    "1-thread" step use 2 cores (74.6 ms of CPU per 37.5 ms step of the transformer LM)."""
    from threadpoolctl import threadpool_limits  # python3-threadpoolctl (python3-sklearn's)
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads):
        return _torch_train(model, x, y, batch, steps, lr, cpu_times)


def _torch_train(model, x, y, batch, steps, lr, cpu_times):
    opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-8)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    per_epoch = len(x) // batch
    losses, times = [], []
    for s in range(steps):
        b = s % per_epoch
        xb, yb = xt[b * batch:(b + 1) * batch], yt[b * batch:(b + 1) * batch]
        t, c = time.perf_counter(), time.process_time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
        if cpu_times is not None:
            cpu_times.append((time.process_time() - c) * 1e3)
        losses.append(loss.item())
    return losses, times


def plot_loss_curves(curves, title, path):
    """Writes a PNG of nnc's and PyTorch's losses per step: `curves` maps a label prefix
    ("" for one model) to (nnc losses, PyTorch losses). False (and a note) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no", os.path.basename(path))
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.figure(figsize=(6, 4))
    for label, (ours, theirs) in curves.items():
        plt.plot(ours, label=("nnc " + label).strip())
        plt.plot(theirs, "--", label=("PyTorch " + label).strip())
    plt.xlabel("step")
    plt.ylabel("loss")
    plt.legend()
    plt.title(title)
    plt.tight_layout()
    plt.savefig(path, dpi=100)
    plt.close()
    return True
