#!/usr/bin/env python3
"""nnc on models nobody tuned for: PyTorch exports against ONNX Runtime, a table and a plot.

Exports models with Debian's PyTorch and torchvision (random weights from a fixed seed,
nothing downloaded; opset 13, as `torch.onnx.export` writes them by default for 1.13):
CNN families, vision transformers and transformer encoders, sequence-first and batch-first,
and recurrent models (LSTM, GRU; batch-first, 2 layers, bidirectional; sequence 64, batch 1).
For each model:
  1. PyTorch computes the reference output on a seeded random input;
  2. `nnc run` computes it too (npy in and out) and the largest error is reported relative
     to the output's range (the bar of the models issue: <= 1e-4);
  3. `nnc bench MODEL --compare ort --json` times nnc and ONNX Runtime alternately, iteration
     by iteration in one process, on the same input and thread count, for each thread count.
     With --rounds R the bench runs R times and each figure is the median of the runs' medians.

    /usr/bin/python3 bench/torch_models.py [--nnc build/tools/nnc/nnc] [--threads 1,2]
        [--rounds 1] [--only vit_b_16,efficientnet_b0] [--siblings] [--list] [--work DIR]
        [--scale S]

--siblings adds other models of the same families (SIBLINGS; with --only, any may be named).

Exported models are kept in --work (default ~/.cache/nnc/torch-models) and re-exported only
when missing. Writes bench/results/torch-models-<date>.md, .json and .png. Needs
python3-torch and python3-torchvision (scripts/setup-bench.sh) and ONNX Runtime for the
comparison (bench/ort). A benchmark, not a test: it reports figures, it asserts nothing.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- the models ---------------------------------------------------------------------------

def _tv(name, size=224):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None), (1, 3, size, size)
    return make


def _video(name, frames=8, size=112):
    """torchvision.models.video (3D convolutions); input [1, 3, frames, size, size]."""
    def make():
        import torchvision
        return getattr(torchvision.models.video, name)(weights=None), (1, 3, frames, size, size)
    return make


def _seg(name, size=224):
    """torchvision.models.segmentation, its "out" map only (no auxiliary head)."""
    def make():
        import torch
        import torchvision

        class Out(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = getattr(torchvision.models.segmentation, name)(
                    weights=None, weights_backbone=None, aux_loss=None)

            def forward(self, x):
                return self.m(x)["out"]
        return Out(), (1, 3, size, size)
    return make


def _encoder(batch_first, d=256, heads=4, layers=2, seq=128, ff=1024):
    def make():
        import torch
        layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu",
                                                 batch_first=batch_first)
        model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        return model, ((1, seq, d) if batch_first else (seq, 1, d))
    return make


class _SharedWeightMatMul:
    """MatMul(f32[197,1,768], W f32[768,2304]): the QKV projection of a sequence-first ViT."""

    @staticmethod
    def make(rows, batch):
        def make():
            import torch

            class M(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.randn(768, 2304) * 0.02)

                def forward(self, x):
                    return torch.matmul(x, self.w)
            return M(), (rows, batch, 768)
        return make


def _activation(fn, shape):
    def make():
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                return fn(x)
        return M(), shape
    return make


def _rnn(kind, inputs, hidden, layers=1, bidirectional=False, batch_first=False, seq=64,
         batch=1):
    """torch.nn.LSTM/GRU (exported as ONNX LSTM/GRU); the model's output is Y alone."""
    def make():
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = getattr(torch.nn, kind)(inputs, hidden, num_layers=layers,
                                                   bidirectional=bidirectional,
                                                   batch_first=batch_first)

            def forward(self, x):
                return self.rnn(x)[0]
        return M(), ((batch, seq, inputs) if batch_first else (seq, batch, inputs))
    return make


# name -> (family, constructor, iterations at 1 thread)
MODELS = {
    "resnet50": ("cnn", _tv("resnet50"), 10),
    "mobilenet_v2": ("cnn", _tv("mobilenet_v2"), 30),
    "mobilenet_v3_small": ("cnn", _tv("mobilenet_v3_small"), 50),
    "efficientnet_b0": ("cnn", _tv("efficientnet_b0"), 20),
    "convnext_tiny": ("cnn", _tv("convnext_tiny"), 10),
    "regnet_y_400mf": ("cnn", _tv("regnet_y_400mf"), 30),
    "shufflenet_v2_x1_0": ("cnn", _tv("shufflenet_v2_x1_0"), 50),
    "squeezenet1_1": ("cnn", _tv("squeezenet1_1"), 50),
    "densenet121": ("cnn", _tv("densenet121"), 10),
    "vit_b_16": ("vit", _tv("vit_b_16"), 5),
    "swin_t": ("vit", _tv("swin_t"), 5),
    "encoder_batch_first": ("encoder", _encoder(True), 20),
    "encoder_seq_first": ("encoder", _encoder(False), 20),
    "matmul_197x1x768_w768x2304": ("op", _SharedWeightMatMul.make(197, 1), 30),
    "matmul_1x197x768_w768x2304": ("op", _SharedWeightMatMul.make(1, 197), 30),
    "silu_1x96x112x112": ("op", _activation(lambda x: x * x.sigmoid(), (1, 96, 112, 112)), 50),
    "gelu_128x3072": ("op", _activation(
        lambda x: __import__("torch").nn.functional.gelu(x), (128, 3072)), 100),
    "lstm_2x256_batch_first": ("rnn", _rnn("LSTM", 64, 256, layers=2, batch_first=True), 30),
    "gru_256": ("rnn", _rnn("GRU", 64, 256), 30),
    "lstm_256_bidirectional": ("rnn", _rnn("LSTM", 64, 256, bidirectional=True,
                                            batch_first=True), 30),
}

# Other members of the same families (--siblings): the models above are what the performance
# work looks at; these check that it holds beyond them (grouped convs of 3 blocks, 1x7 convs,
# 6-block projections on large maps and depthwise stages surfaced here first).
SIBLINGS = {
    "resnet18": ("cnn", _tv("resnet18"), 20),
    "resnext50_32x4d": ("cnn", _tv("resnext50_32x4d"), 10),
    "mobilenet_v3_large": ("cnn", _tv("mobilenet_v3_large"), 30),
    "efficientnet_b1": ("cnn", _tv("efficientnet_b1", 240), 20),
    "efficientnet_v2_s": ("cnn", _tv("efficientnet_v2_s", 384), 5),
    "convnext_small": ("cnn", _tv("convnext_small"), 5),
    "regnet_x_400mf": ("cnn", _tv("regnet_x_400mf"), 30),
    "regnet_y_1_6gf": ("cnn", _tv("regnet_y_1_6gf"), 10),
    "shufflenet_v2_x0_5": ("cnn", _tv("shufflenet_v2_x0_5"), 50),
    "squeezenet1_0": ("cnn", _tv("squeezenet1_0"), 30),
    "densenet169": ("cnn", _tv("densenet169"), 10),
    "mnasnet1_0": ("cnn", _tv("mnasnet1_0"), 30),
    "inception_v3": ("cnn", _tv("inception_v3", 299), 5),
    "vit_b_32": ("vit", _tv("vit_b_32"), 10),
    # Session 18's first runs of these: AlexNet and VGG-11-BN (classifier weights above 2^24
    # elements, which constant folding had left to a run-time transpose) 3.9x and 1.6x ORT;
    # MaxViT-T (attention as Einsum) 1.4x; R3D-18 (3D convs, no fast path yet) 1.9x.
    "alexnet": ("cnn", _tv("alexnet"), 10),
    "vgg11_bn": ("cnn", _tv("vgg11_bn"), 3),
    "maxvit_t": ("vit", _tv("maxvit_t"), 3),
    "r3d_18": ("video", _video("r3d_18"), 2),
    # Session 19's first runs of these (1 thread): DeepLabV3-MobileNetV3 1.52x ORT (its final
    # bilinear resize, 4 gathered taps per output; ASPP convs whose dilated taps read only
    # padding); R(2+1)D-18 1.78x (3-D im2col beyond the L2).
    "deeplabv3_mobilenet_v3_large": ("seg", _seg("deeplabv3_mobilenet_v3_large"), 10),
    "r2plus1d_18": ("video", _video("r2plus1d_18"), 2),
    # Session 21: the other two video families, for the (1, k, k) convs that run as 2-D ones
    # (MC3-18's later stages; S3D's separable convs, 16 frames at 224 as its pooling needs).
    "mc3_18": ("video", _video("mc3_18"), 2),
    "s3d": ("video", _video("s3d", 16, 224), 2),
    "encoder_d512_seq_first": ("encoder", _encoder(False, d=512, heads=8, seq=64, ff=2048), 20),
    "encoder_d384_batch_first": ("encoder", _encoder(True, d=384, heads=6, seq=197, ff=1536), 10),
}


ALL_MODELS = dict(MODELS, **SIBLINGS)


# ---- helpers --------------------------------------------------------------------------------

def run(cmd, env=None, timeout=3600):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def export(name, work):
    """Writes work/name/{model.onnx,input.npy,expected.npy}; returns (folder, error)."""
    import numpy as np
    import torch
    folder = os.path.join(work, name)
    onnx = os.path.join(folder, "model.onnx")
    if all(os.path.exists(os.path.join(folder, f))
           for f in ("model.onnx", "input.npy", "expected.npy")):
        return folder, None
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    try:
        model, shape = ALL_MODELS[name][1]()
        model.eval()
        # Layers initialized to zeros (ViT's classification head) would make every output
        # equal and the accuracy check vacuous: random weights there too.
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2 and not p.any():
                    p.normal_(0.0, 0.02)
        x = torch.randn(*shape)
        with torch.no_grad():
            y = model(x)
        # Outside no_grad: batch-first encoder layers in eval mode without grad take a fused
        # fast path (aten::_transformer_encoder_layer_fwd) that has no ONNX export.
        torch.onnx.export(model, (x,), onnx, input_names=["input"], output_names=["output"],
                          opset_version=13, do_constant_folding=True)
    except Exception as ex:  # an export that PyTorch 1.13 cannot do is reported, not fatal
        return folder, "export failed: %s" % str(ex).strip().splitlines()[0][:200]
    np.save(os.path.join(folder, "input.npy"), x.numpy())
    np.save(os.path.join(folder, "expected.npy"), y.numpy())
    return folder, None


def check_output(nnc, folder, env):
    """Runs nnc once; returns (relative max error, error text)."""
    import numpy as np
    out = os.path.join(folder, "nnc_out")
    rc, _, err = run([nnc, "run", os.path.join(folder, "model.onnx"), "--input",
                      "input=" + os.path.join(folder, "input.npy"), "--output-dir", out,
                      "--output-format", "npy", "-q"], env)
    if rc != 0:
        return None, first_line(err)
    got = np.load(os.path.join(out, "output_0.npy")).astype(np.float64)
    want = np.load(os.path.join(folder, "expected.npy")).astype(np.float64)
    if got.shape != want.shape:
        return None, "shape %s, PyTorch's %s" % (got.shape, want.shape)
    span = float(want.max() - want.min()) or 1.0
    return float(np.abs(got - want).max()) / span, None


def bench(nnc, folder, threads, iterations, env):
    rc, out, err = run([nnc, "bench", os.path.join(folder, "model.onnx"), "--input",
                        "input=" + os.path.join(folder, "input.npy"), "--threads", str(threads),
                        "--iterations", str(iterations), "--warmup", "2", "--json",
                        "--compare", "ort"], env)
    if rc != 0:
        return None, first_line(err)
    return last_json(out), None


def plot(stem, rows, threads, date):
    try:
        import matplotlib
    except ImportError:
        print("plot skipped: matplotlib is not installed (scripts/setup-bench.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["model"] for r in rows if r.get("ratio")]
    names = list(dict.fromkeys(names))
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(names)), 4.5))
    width = 0.8 / max(1, len(threads))
    for j, t in enumerate(threads):
        ys = [(rows_by(rows, n).get("ratio") or {}).get(str(t), 0) for n in names]
        ax.bar([i + j * width for i in range(len(names))], ys, width,
               label="%d thread%s" % (t, "" if t == 1 else "s"))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(threads) - 1) / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("nnc median / ORT median (below 1: nnc faster)")
    ax.set_title("PyTorch exports: nnc vs ONNX Runtime (%s)" % date)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=100)
    print("wrote %s.png" % stem)


def rows_by(rows, name):
    return next((r for r in rows if r["model"] == name), {})


def llc_host_cpu():
    for tool in ("llc-15", "/usr/lib/llvm-15/bin/llc"):
        try:
            rc, out, _ = run([tool, "--version"])
        except OSError:
            continue
        for line in out.splitlines():
            if "Host CPU" in line:
                return line.split(":", 1)[1].strip()
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=os.path.join(ROOT, "build", "tools", "nnc", "nnc"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default=None)
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--siblings", action="store_true",
                    help="also other models of the same families (SIBLINGS)")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/nnc/torch-models"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the iteration counts")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.list:
        for n, (fam, _, _) in ALL_MODELS.items():
            print("%-28s %s%s" % (n, fam, " (sibling)" if n in SIBLINGS else ""))
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("PyTorch is not importable by %s (scripts/setup-bench.sh installs "
                 "python3-torch; run this with /usr/bin/python3)" % sys.executable)
    if not os.access(args.nnc, os.X_OK):
        sys.exit("not built: %s" % args.nnc)
    names = (args.only.split(",") if args.only else
             list(MODELS) + (list(SIBLINGS) if args.siblings else []))
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (--list shows them)" % ", ".join(unknown))
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get("NNC_CACHE_DIR",
                                           os.path.join(args.work, "nnc-cache"))}
    torch.set_num_threads(1)

    rows = []
    for name in names:
        fam, _, its = ALL_MODELS[name]
        row = {"model": name, "family": fam}
        rows.append(row)
        folder, err = export(name, args.work)
        if err:
            row["error"] = err
            print("%-28s %s" % (name, err), flush=True)
            continue
        rel, err = check_output(args.nnc, folder, env)
        if err:
            row["error"] = "nnc run: " + err
            print("%-28s nnc run failed: %s" % (name, err), flush=True)
            continue
        row["max_rel_error"] = rel
        row["nnc_ms"], row["ort_ms"], row["ratio"] = {}, {}, {}
        for t in threads:
            n_it = max(3, int(its * args.scale * (1 if t == 1 else 1.5)))
            nnc_ms, ort_ms = [], []
            for _ in range(args.rounds):
                r, err = bench(args.nnc, folder, t, n_it, env)
                if err or not r or "ort_median_ms" not in r:
                    row["error"] = "nnc bench: " + (err or "no ORT figure")
                    break
                nnc_ms.append(r["median_ms"])
                ort_ms.append(r["ort_median_ms"])
            if not nnc_ms:
                break
            row["nnc_ms"][str(t)] = statistics.median(nnc_ms)
            row["ort_ms"][str(t)] = statistics.median(ort_ms)
            row["ratio"][str(t)] = row["nnc_ms"][str(t)] / row["ort_ms"][str(t)]
        print("%-28s err %.1e  %s" % (name, rel, "  ".join(
            "%sT nnc %.3f ms ort %.3f ms (%.2f)" % (t, row["nnc_ms"][t], row["ort_ms"][t],
                                                   row["ratio"][t])
            for t in row["ratio"])), flush=True)

    date = datetime.date.today().isoformat()
    meta = {"date": date, "machine": platform.processor() or platform.machine(),
            "llc_host_cpu": llc_host_cpu(), "cores": os.cpu_count(),
            "torch": torch.__version__, "rounds": args.rounds, "nnc": args.nnc,
            "load_after": os.getloadavg()}
    stem = args.out or os.path.join(HERE, "results", "torch-models-%s" % date)
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "models": rows}, f, indent=1)
    lines = ["# PyTorch exports: nnc vs ONNX Runtime (%s)" % date, "",
             "Machine: %s cores, LLVM host CPU `%s`; PyTorch %s; each figure the median of "
             "%d run(s)' medians, nnc and ORT alternating in one process." %
             (meta["cores"], meta["llc_host_cpu"], meta["torch"], args.rounds), "",
             "| model | family | max error / range | " +
             " | ".join("nnc %dT ms | ORT %dT ms | nnc/ORT %dT" % (t, t, t) for t in threads) +
             " |",
             "|---|---|---|" + "---|---|---|" * len(threads)]
    for r in rows:
        if "ratio" not in r or len(r["ratio"]) < len(threads):
            lines.append("| %s | %s | %s |" % (r["model"], r["family"],
                                               r.get("error", "incomplete")))
            continue
        cells = []
        for t in threads:
            k = str(t)
            cells.append("%.3f | %.3f | **%.2f**" % (r["nnc_ms"][k], r["ort_ms"][k],
                                                      r["ratio"][k]))
        lines.append("| %s | %s | %.1e | %s |" % (r["model"], r["family"], r["max_rel_error"],
                                                 " | ".join(cells)))
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s.md and .json" % stem)
    plot(stem, rows, threads, date)


if __name__ == "__main__":
    main()
