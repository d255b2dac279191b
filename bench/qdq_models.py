#!/usr/bin/env python3
"""Quantized (QAT-style Q/DQ) PyTorch exports: their generator, nnc's accuracy on them, and
nnc's latency on them against ONNX Runtime's int8 path (issue 47).

What the models are. Debian's PyTorch 1.13 (random weights from a fixed seed, nothing
downloaded) builds each float model, folds its batch norms into the convolutions
(torch.fx.experimental.optimization.fuse) and puts torch.ao.quantization fake-quantize modules
in one of three placements:
  - "conv-inputs" / "linear-inputs": each activation that a Conv or Linear reads is quantized
    once (one fake-quantize per tensor, shared by the layers that read it), and the layer's
    weight; nothing else (a residual add runs in float);
  - "all": torch.ao's FX QAT (prepare_qat_fx with one global qconfig): the inputs and outputs of
    every op that torch.ao quantizes, residual adds, pooling and the classifier included;
  - "linear-io": a Linear's inputs and its outputs (so attention's matmuls read quantized Q, K, V).
Weights: per-channel symmetric int8 (-128..127, axis 0); activations: per-tensor affine uint8
(0..255). A few batches of random data (observers on) give the observers real ranges; then the
observers are frozen and torch.onnx.export (opset 13) writes the fake-quantize modules as
QuantizeLinear/DequantizeLinear pairs. The same float model, BN folded and without fake
quantization, is exported beside it ("fp32"), with the same weights.

Each export is a folder in ONNX test-data layout: WORK/NAME/model.onnx with
test_data_set_0/input_0.pb and output_0.pb (PyTorch's fake-quant output on a seeded random
input, not one of the calibration batches); the float model in WORK/fp32_BASE/ likewise.

    /usr/bin/python3 bench/qdq_models.py export [--work DIR] [--only NAMES] [--force]
    /usr/bin/python3 bench/qdq_models.py check  [--nnc PATH] [--only NAMES] [--targets ...]
    /usr/bin/python3 bench/qdq_models.py bench  [--nnc PATH] [--threads 1,2] [--rounds 3]
                                                [--only NAMES] [--scale S] [--out FILE.md]
                                                [--base NNC] [--engines nnc,nnc_base,...]

check: `nnc run` of each export on cpu (x86-64-v4 where the host has it), `--cpu x86-64-v3`,
and the interpreter for the small CNNs, against PyTorch's fake-quant output: the largest
absolute difference over the output's range (bars: 1.5e-2 for the large models, 2e-3 for the
small CNNs) and, for the classifiers, the same top-1 class. Exits 1 when a bar is missed.

bench: the check on cpu, then per model and thread count four engines, each in its own
process, the order rotated every round: nnc on the Q/DQ model (`nnc bench --json`), ONNX
Runtime on it (its default session options: its graph optimizer turns the Q/DQ pairs into its
own integer kernels), ONNX Runtime and nnc on the fp32 model. Each figure is the median over
rounds of each run's median. --base runs a second nnc binary (say, main's) on the Q/DQ model
in the same rounds; --engines leaves engines out. Writes bench/results/qdq-models.md (.json
beside it) unless --out.

A benchmark, not a test (tests/cli/qdq_torch_test.py asserts the small CNNs' accuracy).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.stats import median, order, ratios  # noqa: E402

sys.path.insert(0, os.path.join(nnc.ROOT, "scripts"))
from onnxw import tensor  # noqa: E402

WORK = os.path.expanduser("~/.cache/nnc/qdq-models")

# ---- the float models -----------------------------------------------------------------------


def _torchvision(name):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None), (1, 3, 224, 224)
    return make


def _bert(layers=4, seq=128, hidden=256, heads=4, ff=1024):
    """A BERT-style post-LN encoder whose projections are nn.Linear modules (what the
    linear-* placements quantize); input [1, seq, hidden] (the embeddings' output)."""
    def make():
        import torch
        from torch import nn
        dh = hidden // heads

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
                self.fc1, self.fc2 = nn.Linear(hidden, ff), nn.Linear(ff, hidden)
                self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
                self.gelu = nn.GELU()

            def heads(self, t):
                return t.reshape(1, seq, heads, dh).transpose(1, 2)

            def forward(self, x):
                q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
                a = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * (dh ** -0.5), dim=-1)
                c = torch.matmul(a, v).transpose(1, 2).reshape(1, seq, hidden)
                x = self.ln1(x + self.o(c))
                return self.ln2(x + self.fc2(self.gelu(self.fc1(x))))

        return nn.Sequential(*[Layer() for _ in range(layers)]), (1, seq, hidden)
    return make


def _small_cnn():
    """LeNet-like: two conv + BN + ReLU + max-pool stages and two Linear layers, 3x32x32."""
    def make():
        from torch import nn
        return nn.Sequential(
            nn.Conv2d(3, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10)), (1, 3, 32, 32)
    return make


def _small_resnet():
    """A stem conv, one inverted-residual block (1x1 expand, depthwise 3x3, 1x1 project, BN
    after each, a residual add), a strided conv, global average pooling and a Linear: the ops
    of MobileNetV2 and ResNet at 3x32x32."""
    def make():
        from torch import nn

        def cbr(cin, cout, k, stride=1, groups=1, relu=True):
            layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                      nn.BatchNorm2d(cout)]
            return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(cbr(16, 48, 1), cbr(48, 48, 3, groups=48),
                                          cbr(48, 16, 1, relu=False))

            def forward(self, x):
                return x + self.body(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.block = cbr(3, 16, 3), Block()
                self.down = cbr(16, 32, 3, stride=2)
                self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(32, 10)

            def forward(self, x):
                y = self.pool(self.down(self.block(self.stem(x))))
                return self.fc(y.flatten(1))
        return Net(), (1, 3, 32, 32)
    return make


# base name -> (constructor, is a classifier, calibration batches)
BASES = {
    "resnet50": (_torchvision("resnet50"), True, 4),
    "mobilenet_v2": (_torchvision("mobilenet_v2"), True, 4),
    "bert4": (_bert(), False, 4),
    "small_cnn": (_small_cnn(), True, 8),
    "small_resnet": (_small_resnet(), True, 8),
}

# export name -> (base, placement, size class: "large" or "small", timed iterations at 1 thread)
MODELS = {
    "resnet50_conv_inputs": ("resnet50", "conv-inputs", "large", 8),
    "resnet50_all": ("resnet50", "all", "large", 8),
    "mobilenet_v2_all": ("mobilenet_v2", "all", "large", 30),
    "bert4_linear_inputs": ("bert4", "linear-inputs", "large", 15),
    "bert4_linear_io": ("bert4", "linear-io", "large", 15),
    "small_cnn_conv_inputs": ("small_cnn", "conv-inputs", "small", 300),
    "small_resnet_all": ("small_resnet", "all", "small", 300),
}

# The bars of issue 47: max |nnc - PyTorch| over the output's range.
BARS = {"large": 1.5e-2, "small": 2e-3}

# ---- quantization ----------------------------------------------------------------------------


def qconfig():
    """Per-channel symmetric int8 weights, per-tensor affine uint8 activations (full range)."""
    import torch
    from torch.ao.quantization import (FakeQuantize, MovingAverageMinMaxObserver,
                                       MovingAveragePerChannelMinMaxObserver, QConfig)
    act = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                 quant_max=255, dtype=torch.quint8,
                                 qscheme=torch.per_tensor_affine, reduce_range=False)
    weight = FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver,
                                    quant_min=-128, quant_max=127, dtype=torch.qint8,
                                    qscheme=torch.per_channel_symmetric, reduce_range=False,
                                    ch_axis=0)
    return QConfig(activation=act, weight=weight)


def _set_module(gm, target, module):
    parent, _, name = target.rpartition(".")
    setattr(gm.get_submodule(parent) if parent else gm, name, module)


def quantize_layers(gm, outputs=False):
    """Fake-quantizes what each Conv2d/Linear of the FX graph module reads (its input
    activation, once per tensor however many layers read it, and its weight) and, with
    outputs, what it writes. In place; returns gm."""
    import torch
    qc = qconfig()
    qat = {torch.nn.Conv2d: torch.nn.qat.Conv2d, torch.nn.Linear: torch.nn.qat.Linear}
    modules = dict(gm.named_modules())
    graph = gm.graph
    count = [0]

    def fake_quant_after(value):
        name = "act_fq_%d" % count[0]
        count[0] += 1
        gm.add_submodule(name, qc.activation())
        with graph.inserting_after(value):
            return graph.call_module(name, (value,))

    done = {}  # a value -> its fake-quantized copy
    for n in list(graph.nodes):
        if n.op != "call_module" or type(modules[n.target]) not in qat:
            continue
        src = n.args[0]
        if src not in done:
            done[src] = fake_quant_after(src)
        n.args = (done[src],) + tuple(n.args[1:])
        layer = modules[n.target]
        layer.qconfig = qc
        _set_module(gm, n.target, qat[type(layer)].from_float(layer))
        if outputs:
            fq = fake_quant_after(n)
            n.replace_all_uses_with(fq, delete_user_cb=lambda user: user is not fq)
            done[n] = fq
    graph.lint()
    gm.recompile()
    return gm


def quantize(float_gm, placement, example):
    """The fake-quant model of a BN-folded FX graph module, observers still on."""
    import copy
    gm = copy.deepcopy(float_gm)
    if placement == "all":
        from torch.ao.quantization import QConfigMapping
        from torch.ao.quantization.quantize_fx import prepare_qat_fx
        return prepare_qat_fx(gm.train(), QConfigMapping().set_global(qconfig()), (example,))
    if placement in ("conv-inputs", "linear-inputs"):
        return quantize_layers(gm)
    if placement == "linear-io":
        return quantize_layers(gm, outputs=True)
    raise ValueError("unknown placement %r" % placement)


def scalar_qparams(model):
    """Makes each per-tensor fake-quantize's scale and zero point 0-d. torch keeps them as
    1-element tensors and exports them so; the ONNX spec's per-tensor parameters are scalars,
    and ONNX Runtime's QLinearAdd fusion rejects the 1-element form ("Scale and Zero-point
    must be a scalar"). The values, and so PyTorch's output, are unchanged."""
    import torch
    for m in model.modules():
        if isinstance(m, torch.ao.quantization.FakeQuantize) and \
                m.qscheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            m.scale = m.scale.reshape(())
            m.zero_point = m.zero_point.reshape(())


# ---- export ----------------------------------------------------------------------------------


def write_test_data(folder, x, y):
    """folder/test_data_set_0/{input_0,output_0}.pb (ONNX TensorProto, float) and the same as
    input.npy / expected.npy."""
    import numpy as np
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for fname, name, a in (("input_0.pb", "input", x), ("output_0.pb", "output", y)):
        a = np.ascontiguousarray(a, dtype=np.float32)
        with open(os.path.join(data, fname), "wb") as f:
            f.write(tensor(name, list(a.shape), a.ravel().tolist()))
    np.save(os.path.join(folder, "input.npy"), x)
    np.save(os.path.join(folder, "expected.npy"), y)


def _onnx_export(model, x, path):
    import torch
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                      opset_version=13, do_constant_folding=True)


def _complete(folder):
    return all(os.path.exists(os.path.join(folder, f)) for f in (
        "model.onnx", "input.npy", "expected.npy", "test_data_set_0/input_0.pb",
        "test_data_set_0/output_0.pb"))


def float_folder(work, base):
    return os.path.join(work, "fp32_" + base)


def export_base(base, names, work, force=False):
    """Exports the float model of `base` and its Q/DQ variants `names`. Returns
    {folder name: error text or None}."""
    import torch
    import torch.fx.experimental.optimization as fxopt
    results = {}
    todo = [n for n in names if force or not _complete(os.path.join(work, n))]
    ffolder = float_folder(work, base)
    if not todo and _complete(ffolder):
        return {n: None for n in names}
    make, _, batches = BASES[base]
    torch.manual_seed(0)
    model, shape = make()
    model.eval()
    # torchvision's batch norms start as identities; statistics of a trained model make the
    # folding do something.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    float_gm = fxopt.fuse(model)  # BN folded into the convs; a GraphModule
    x = torch.randn(*shape)
    calibration = [torch.randn(*shape) for _ in range(batches)]
    with torch.no_grad():
        y = float_gm(x)
    if force or not _complete(ffolder):
        os.makedirs(ffolder, exist_ok=True)
        _onnx_export(float_gm, x, os.path.join(ffolder, "model.onnx"))
        write_test_data(ffolder, x.numpy(), y.numpy())
    for name in todo:
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        try:
            q = quantize(float_gm, MODELS[name][1], x)
            q.eval()  # dropout off; the fake-quantize observers stay on for calibration
            with torch.no_grad():
                for c in calibration:
                    q(c)
            q.apply(torch.ao.quantization.disable_observer)
            scalar_qparams(q)
            with torch.no_grad():
                yq = q(x)
            _onnx_export(q, x, os.path.join(folder, "model.onnx"))
            write_test_data(folder, x.numpy(), yq.numpy())
            results[name] = None
        except Exception as ex:  # an export PyTorch cannot do is reported, not fatal
            results[name] = "export failed: %s" % str(ex).strip().splitlines()[0][:200]
    for name in names:
        results.setdefault(name, None)
    return results


def export(names, work, force=False):
    """Exports `names` (grouped by float model). Returns {name: error or None}."""
    out = {}
    for base in dict.fromkeys(MODELS[n][0] for n in names):
        out.update(export_base(base, [n for n in names if MODELS[n][0] == base], work, force))
    return out


# ---- accuracy --------------------------------------------------------------------------------


def compare(got, want, classifier):
    """(max |got - want| / range(want), same top-1 or None for a non-classifier)."""
    import numpy as np
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    span = float(want.max() - want.min()) or 1.0
    rel = float(np.abs(got - want).max()) / span
    top1 = None
    if classifier:
        top1 = bool((got.reshape(got.shape[0], -1).argmax(1) ==
                     want.reshape(want.shape[0], -1).argmax(1)).all())
    return rel, top1


def run_nnc(nnc_path, folder, target="cpu", cpu=None, env=None, classifier=False):
    """`nnc run` of folder/model.onnx on its test data: ((rel, top1), None) or (None, error)."""
    import numpy as np
    tag = target + ("_" + cpu if cpu else "")
    out = os.path.join(folder, "nnc_out_" + tag)
    cmd = nnc.command(nnc_path) + ["run", os.path.join(folder, "model.onnx"), "--inputs-dir",
                                   os.path.join(folder, "test_data_set_0"), "--output-dir", out,
                                   "--output-format", "npy", "--target", target, "-q"]
    if cpu:
        cmd += ["--cpu", cpu]
    rc, _, err = proc.run(cmd, env)
    if rc != 0:
        return None, proc.last_line(err) or "exit %d" % rc
    got = np.load(os.path.join(out, "output_0.npy"))
    want = np.load(os.path.join(folder, "expected.npy"))
    if got.shape != want.shape:
        return None, "shape %s, PyTorch's %s" % (got.shape, want.shape)
    return compare(got, want, classifier), None


def checks_for(name, targets):
    """The (target, cpu) pairs a model is checked on: the interpreter for the small ones."""
    pairs = [("cpu", None), ("cpu", "x86-64-v3")] if "cpu" in targets else []
    if "interp" in targets and MODELS[name][2] == "small":
        pairs.append(("interp", None))
    return pairs


def check(nnc_path, names, work, targets, env):
    """Checks each model on each of its targets. Returns (rows, all within the bars)."""
    rows, ok = [], True
    for name in names:
        base, placement, size, _ = MODELS[name]
        classifier = BASES[base][1]
        for target, cpu in checks_for(name, targets):
            res, err = run_nnc(nnc_path, os.path.join(work, name), target, cpu, env, classifier)
            label = target + (" --cpu " + cpu if cpu else "")
            if err:
                rows.append({"model": name, "target": label, "error": err})
                ok = False
                print("%-24s %-22s FAILED: %s" % (name, label, err), flush=True)
                continue
            rel, top1 = res
            good = rel <= BARS[size] and top1 is not False
            ok = ok and good
            rows.append({"model": name, "target": label, "rel": rel, "top1": top1,
                         "bar": BARS[size], "ok": good})
            print("%-24s %-22s max err / range %.2e (bar %g)%s %s" % (
                name, label, rel, BARS[size],
                "" if top1 is None else ", top-1 %s" % ("same" if top1 else "DIFFERENT"),
                "ok" if good else "MISSED"), flush=True)
    return rows, ok


# ---- the benchmark ---------------------------------------------------------------------------


def bench(args, names, env):
    import numpy as np
    import torch
    peer = ort.from_arguments(args)
    if peer.missing():
        sys.exit("qdq_models.py: " + peer.missing())
    threads = [int(t) for t in args.threads.split(",")]
    mach = machine.describe(args.nnc)
    rows, ort_version = [], None
    acc_rows, _ = check(args.nnc, names, args.work, ["cpu"], env)
    for name in names:
        base, placement, size, its = MODELS[name]
        folder, ffolder = os.path.join(args.work, name), float_folder(args.work, base)
        span = float(np.ptp(np.load(os.path.join(folder, "expected.npy")))) or 1.0
        models = {"nnc": folder, "ort_int8": folder, "ort_fp32": ffolder, "nnc_fp32": ffolder}
        if args.base:
            models["nnc_base"] = folder
        if args.engines:
            models = {e: f for e, f in models.items() if e in args.engines.split(",")}
        for t in threads:
            n_it = max(3, int(its * args.scale))
            row = {"model": name, "placement": placement, "threads": t, "ms": {}, "runs": {}}
            rows.append(row)

            def run(engine, t=t, n_it=n_it):
                model = os.path.join(models[engine], "model.onnx")
                data = os.path.join(models[engine], "test_data_set_0")
                if engine.startswith("nnc"):
                    binary = args.base if engine == "nnc_base" else args.nnc
                    return nnc.bench(binary, model, t, n_it, 2, [
                        "--input", "input=" + os.path.join(data, "input_0.pb")], env)
                return peer.run(model, t, n_it, 2, inputs_dir=data)

            rounds = []  # {engine: median_ms} of each round, for ratios within a round
            for r in range(args.rounds):
                rounds.append({})
                for engine in order(models, r, rotate=True):
                    res, err = run(engine)
                    if err:
                        row.setdefault("errors", {})[engine] = err
                        print("%-24s %dT %s: %s" % (name, t, engine, err), flush=True)
                        continue
                    rounds[-1][engine] = res["median_ms"]
                    row["runs"].setdefault(engine, []).append(res["median_ms"])
                    if engine == "ort_int8" and "max_abs_err_vs_output_0" in res:
                        row["ort_int8_rel"] = res["max_abs_err_vs_output_0"] / span
                    if engine.startswith("ort"):
                        ort_version = res.get("version", ort_version)
            row["ms"] = {e: median(v) for e, v in row["runs"].items()}
            pairs = [(rd["nnc"], rd["ort_int8"]) for rd in rounds if "nnc" in rd and
                     "ort_int8" in rd]
            if pairs:
                row["nnc_over_ort_int8"] = ratios(pairs)
            pairs = [(rd["nnc"], rd["nnc_base"]) for rd in rounds if "nnc" in rd and
                     "nnc_base" in rd]
            if pairs:
                row["nnc_over_base"] = ratios(pairs)
            print("%-24s %dT %s" % (name, t, "  ".join(
                "%s %.3f ms" % (e, row["ms"][e]) for e in models if e in row["ms"])), flush=True)

    path = report.result_path("qdq-models", args.out)
    lines = report.header("Quantized (Q/DQ) PyTorch exports: nnc vs ONNX Runtime int8", mach,
                          machine.load(), [
                              "PyTorch %s; %s." % (torch.__version__,
                                                   peer.describe(ort_version))],
                          python="/usr/bin/python3")
    lines += [
        "Models: `bench/qdq_models.py`'s docstring (QAT fake-quant, BN folded, opset 13, "
        "random weights). \"nnc\" and \"ORT int8\" run the Q/DQ model; \"ORT fp32\" and "
        "\"nnc fp32\" the same float model without fake quantization. Each figure is the "
        "median over %d round(s) of each run's median, the engines each in its own "
        "process, their order rotated every round.%s" % (
            args.rounds, (" \"nnc base\": %s on the Q/DQ model in the same rounds." % args.base)
            if args.base else ""), "",
        "## Accuracy against PyTorch's fake-quant output", "",
        "max |output - PyTorch| / (max - min of PyTorch's output); top-1: the same class as "
        "PyTorch (classifiers). ORT int8's figure is from its timed run's output.", ""]
    acc = []
    for name in names:
        size = MODELS[name][2]
        cells = [name, MODELS[name][1], "%g" % BARS[size]]
        for label in ("cpu", "cpu --cpu x86-64-v3"):
            r = next((a for a in acc_rows if a["model"] == name and a["target"] == label), None)
            if r is None:
                cells.append("—")
            elif "error" in r:
                cells.append("fails: " + r["error"])
            else:
                cells.append("%.2e%s%s" % (r["rel"], "" if r["top1"] is None else
                                            (", top-1 same" if r["top1"] else
                                             ", **top-1 differs**"),
                                            "" if r["ok"] else " **over the bar**"))
        o = [r.get("ort_int8_rel") for r in rows if r["model"] == name and "ort_int8_rel" in r]
        cells.append("%.2e" % o[0] if o else "—")
        acc.append(cells)
    lines += report.table(["model", "placement", "bar", "nnc cpu", "nnc --cpu x86-64-v3",
                           "ORT int8"], acc)
    lines += ["", "## Latency", "",
              "ms per inference; ratios below 1: nnc's Q/DQ model is faster. The range is that "
              "of nnc / ORT int8 taken within each round.", ""]
    trows = []
    for r in rows:
        ms = r["ms"]

        def cell(e):
            return ("%.3f" % ms[e]) if e in ms else ("fails" if e in r.get("errors", {})
                                                   else "—")

        def ratio(a, b):
            return "**%.2f**" % (ms[a] / ms[b]) if a in ms and b in ms else "—"
        sp = r.get("nnc_over_ort_int8")
        trows.append([r["model"], r["threads"], cell("nnc"), cell("ort_int8"),
                      cell("ort_fp32"), cell("nnc_fp32"), ratio("nnc", "ort_int8"),
                      "%.2f-%.2f" % (sp["min"], sp["max"]) if sp else "—",
                      ratio("nnc", "nnc_fp32"), ratio("ort_int8", "ort_fp32")])
        if args.base:
            bp = r.get("nnc_over_base")
            trows[-1] += [cell("nnc_base"), ratio("nnc", "nnc_base"),
                          "%.2f-%.2f" % (bp["min"], bp["max"]) if bp else "—"]
    lines += report.table(["model", "threads", "nnc Q/DQ", "ORT int8", "ORT fp32", "nnc fp32",
                           "nnc / ORT int8", "its range over rounds", "nnc Q/DQ / nnc fp32",
                           "ORT int8 / ORT fp32"] +
                          (["nnc base Q/DQ", "nnc / nnc base", "its range over rounds"]
                           if args.base else []), trows)
    errors = ["- %s, %d thread(s), %s: %s" % (r["model"], r["threads"], e, m)
              for r in rows for e, m in r.get("errors", {}).items()]
    if errors:
        lines += ["", "Failures:", ""] + errors
    report.write(path, lines, {"machine": mach, "torch": torch.__version__,
                               "rounds": args.rounds, "accuracy": acc_rows, "latency": rows})


# ---- command line ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["export", "check", "bench", "list"])
    ap.add_argument("--work", default=WORK, help="where the exports are kept (default %s)" % WORK)
    ap.add_argument("--only", default=None, help="comma-separated model names (list shows them)")
    ap.add_argument("--force", action="store_true", help="export again even when present")
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--targets", default="cpu,interp",
                    help="check: cpu (native and --cpu x86-64-v3) and/or interp (small CNNs)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the iteration counts")
    ap.add_argument("--base", default=None,
                    help="bench: another nnc binary run on the Q/DQ model in the same rounds "
                         "(engine nnc_base; an A/B of two builds)")
    ap.add_argument("--engines", default=None,
                    help="bench: comma-separated subset of nnc,nnc_base,ort_int8,ort_fp32,"
                         "nnc_fp32 (default: all)")
    ort.add_arguments(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.action == "list":
        for n, (base, placement, size, _) in MODELS.items():
            print("%-24s %-14s %-14s %s" % (n, base, placement, size))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (`list` shows them)" % ", ".join(unknown))
    torch = proc.require_torch()
    torch.set_num_threads(1)
    exported = export(names, args.work, args.force)
    failed = [n for n, e in exported.items() if e]
    for n in failed:
        print("%s: %s" % (n, exported[n]))
    if args.action == "export":
        return 1 if failed else 0
    names = [n for n in names if n not in failed]
    nnc.require(args.nnc)
    env = {"NNC_CACHE_DIR": os.environ.get("NNC_CACHE_DIR", os.path.join(args.work, "nnc-cache"))}
    if args.action == "check":
        _, ok = check(args.nnc, names, args.work, args.targets.split(","), env)
        return 0 if ok and not failed else 1
    bench(args, names, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
