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
  3. `nnc bench MODEL --json` and ONNX Runtime (its own process, its default spinning pool:
     nncbench.ort) time the model on the same input and thread count, alternately, for each
     thread count. With --rounds R they run R times each, the order flipping every round, and
     each figure is the median of the runs' medians.

    /usr/bin/python3 bench/torch_models.py [--nnc build/tools/nnc/nnc] [--threads 1,2]
        [--rounds 1] [--only vit_b_16,efficientnet_b0] [--siblings] [--list] [--work DIR]
        [--scale S] [--ort-spin default|0|1] [--out FILE.md]

--siblings adds other models of the same families (SIBLINGS; with --only, any may be named).

Exported models are kept in --work (default ~/.cache/nnc/torch-models) and re-exported only
when missing. Writes bench/results/torch-models.md (torch-models-siblings.md with --siblings),
.json and .png; a partial run (--only) belongs elsewhere (--out). Needs python3-torch and
python3-torchvision (scripts/setup-bench.sh) and ONNX Runtime for the comparison (bench/ort).
A benchmark, not a test: it reports figures, it asserts nothing.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.stats import median, order  # noqa: E402


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


def check_output(nnc_path, folder, env):
    """Runs nnc once; returns (relative max error, error text)."""
    import numpy as np
    out = os.path.join(folder, "nnc_out")
    rc, _, err = proc.run([nnc_path, "run", os.path.join(folder, "model.onnx"), "--input",
                           "input=" + os.path.join(folder, "input.npy"), "--output-dir", out,
                           "--output-format", "npy", "-q"], env)
    if rc != 0:
        return None, proc.last_line(err)
    got = np.load(os.path.join(out, "output_0.npy")).astype(np.float64)
    want = np.load(os.path.join(folder, "expected.npy")).astype(np.float64)
    if got.shape != want.shape:
        return None, "shape %s, PyTorch's %s" % (got.shape, want.shape)
    span = float(want.max() - want.min()) or 1.0
    return float(np.abs(got - want).max()) / span, None


def plot(stem, rows, threads, date):
    names = list(dict.fromkeys(r["model"] for r in rows if r.get("ratio")))
    series = {"%d thread%s" % (t, "" if t == 1 else "s"):
              [(next(r for r in rows if r["model"] == n).get("ratio") or {}).get(str(t), 0)
               for n in names] for t in threads}
    report.bar_plot(stem + ".png", names, [("", series)],
                    "nnc median / ORT median (below 1: nnc faster)",
                    "PyTorch exports: nnc vs ONNX Runtime (%s)" % date)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default=None)
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--siblings", action="store_true",
                    help="also other models of the same families (SIBLINGS)")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/nnc/torch-models"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the iteration counts")
    ort.add_arguments(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.list:
        for n, (fam, _, _) in ALL_MODELS.items():
            print("%-28s %s%s" % (n, fam, " (sibling)" if n in SIBLINGS else ""))
        return
    torch = proc.require_torch()
    nnc.require(args.nnc)
    peer = ort.from_arguments(args)
    if peer.missing():
        sys.exit("torch_models.py: " + peer.missing())
    names = (args.only.split(",") if args.only else
             list(MODELS) + (list(SIBLINGS) if args.siblings else []))
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (--list shows them)" % ", ".join(unknown))
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get("NNC_CACHE_DIR",
                                           os.path.join(args.work, "nnc-cache"))}
    torch.set_num_threads(1)
    mach = machine.describe(args.nnc)
    ort_version = None

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
        model = os.path.join(folder, "model.onnx")
        feed = "input=" + os.path.join(folder, "input.npy")
        for t in threads:
            n_it = max(3, int(its * args.scale * (1 if t == 1 else 1.5)))
            engines = {
                "nnc": lambda: nnc.bench(args.nnc, model, t, n_it, 2, ["--input", feed], env),
                "ort": lambda: peer.run(model, t, n_it, 2, inputs=[feed]),
            }
            ms = {"nnc": [], "ort": []}
            for r in range(args.rounds):
                for who in order(engines, r):
                    res, err = engines[who]()
                    if err:
                        row["error"] = "%s bench: %s" % (who, err)
                        break
                    ms[who].append(res["median_ms"])
                    ort_version = res.get("version") if who == "ort" else ort_version
                if "error" in row:
                    break
            if "error" in row:
                break
            row["nnc_ms"][str(t)] = median(ms["nnc"])
            row["ort_ms"][str(t)] = median(ms["ort"])
            row["ratio"][str(t)] = row["nnc_ms"][str(t)] / row["ort_ms"][str(t)]
        print("%-28s err %.1e  %s" % (name, rel, "  ".join(
            "%sT nnc %.3f ms ort %.3f ms (%.2f)" % (t, row["nnc_ms"][t], row["ort_ms"][t],
                                                   row["ratio"][t])
            for t in row["ratio"])), flush=True)

    stem = os.path.splitext(report.result_path(
        "torch-models-siblings" if args.siblings else "torch-models", args.out))[0]
    lines = report.header("PyTorch exports: nnc vs ONNX Runtime", mach, machine.load(), [
        "PyTorch %s; %s." % (torch.__version__, peer.describe(ort_version))],
        python="/usr/bin/python3")
    lines += ["Each figure the median of %d run(s)' medians, nnc and ORT alternating, each in "
              "its own process." % args.rounds, ""]
    table_rows = []
    for r in rows:
        if "ratio" not in r or len(r["ratio"]) < len(threads):
            table_rows.append([r["model"], r["family"], r.get("error", "incomplete")])
            continue
        cells = [r["model"], r["family"], "%.1e" % r["max_rel_error"]]
        for t in threads:
            k = str(t)
            cells += ["%.3f" % r["nnc_ms"][k], "%.3f" % r["ort_ms"][k], "**%.2f**" % r["ratio"][k]]
        table_rows.append(cells)
    lines += report.table(["model", "family", "max error / range"] + [
        c for t in threads for c in ("nnc %dT ms" % t, "ORT %dT ms" % t, "nnc/ORT %dT" % t)],
        table_rows)
    report.write(stem + ".md", lines, {"machine": mach, "torch": torch.__version__,
                                       "rounds": args.rounds, "models": rows})
    plot(stem, rows, threads, mach["date"])


if __name__ == "__main__":
    main()
