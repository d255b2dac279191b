#!/usr/bin/env python3
"""`nnc train` on PyTorch models with layers that train differently from how they infer.

Batch norm: a conv + batch norm + relu + linear model against PyTorch's training in train() mode: the batch norm normalizes with the batch's statistics and updates its running
mean and variance (PyTorch's momentum 0.1, ONNX's 0.9; the running variance from the unbiased
batch variance).

The model is exported twice from the same weights: in eval mode (BatchNormalization with
training_mode=0) and in training mode (training_mode=1), both without constant folding (which
would merge equal initializers). For each export and each target (interp, cpu, and opencl
where a device is listed), STEPS SGD steps over batches in order; then the trained model's
running_mean and running_var within 1e-5 (relative to the largest) of PyTorch's, every loss
within 1e-4 (relative) of PyTorch's, and `nnc run` of the trained eval-mode model within 1e-4
of PyTorch's eval() outputs.

Dropout: an MLP with dropout exported in training mode, trained with lr 0 on one repeated
batch, so that only the masks move the loss: the losses change every step (a new mask), the
same --seed gives the same losses, another seed others.

Needs PyTorch, numpy and onnx (Debian's python3-torch and
python3-onnx, for /usr/bin/python3); without them the test says so and is skipped (77).

Usage: train_modes_test.py NNC_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

STEPS, BATCH, CLASSES = 12, 8, 3


def main():
    nnc = sys.argv[1]
    try:
        import numpy as np
        import onnx
        import onnx.numpy_helper
        import torch
    except ImportError as e:
        print("SKIP: %s (PyTorch, numpy and onnx are needed)" % e)
        return 77

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4 * 6 * 6, CLASSES)

        def forward(self, x):
            return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))

    def make():
        torch.manual_seed(0)
        m = Net()
        with torch.no_grad():  # away from PyTorch's fresh 0/1, so every statistic is tested
            m.bn.weight.uniform_(0.5, 1.5)
            m.bn.bias.uniform_(-0.5, 0.5)
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2.0)
        return m

    rng = np.random.default_rng(1)
    x = (rng.standard_normal((STEPS * BATCH, 2, 6, 6)) * 2 + 0.5).astype(np.float32)
    y = rng.integers(0, CLASSES, STEPS * BATCH).astype(np.int64)
    xtest = rng.standard_normal((5, 2, 6, 6)).astype(np.float32)

    peer = make()
    peer.train()
    opt = torch.optim.SGD(peer.parameters(), lr=0.1)
    theirs = []
    for s in range(STEPS):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(peer(xb), yb)
        loss.backward()
        opt.step()
        theirs.append(loss.item())
    peer.eval()
    with torch.no_grad():
        expected_out = peer(torch.from_numpy(xtest)).numpy()
    stats = {"bn.running_mean": peer.bn.running_mean.numpy(),
             "bn.running_var": peer.bn.running_var.numpy()}

    targets = ["interp", "cpu"]
    devices = subprocess.run([nnc, "devices"], capture_output=True, text=True).stdout
    if "opencl:" in devices:
        targets.append("opencl")
    else:
        print("no OpenCL device listed: the opencl target is not tested")

    failures = []
    with tempfile.TemporaryDirectory() as d:
        p = lambda n: os.path.join(d, n)  # noqa: E731
        np.save(p("x.npy"), x)
        np.save(p("y.npy"), y)
        np.save(p("xtest.npy"), xtest)
        for mode in ("eval", "training"):
            path = p("%s.onnx" % mode)
            m = make()
            m.train(mode == "training")
            torch.onnx.export(m, (torch.from_numpy(x[:BATCH]),), path, input_names=["x"],
                              output_names=["logits"], opset_version=15,
                              training=torch.onnx.TrainingMode.PRESERVE,
                              do_constant_folding=False,
                              dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
            exported = onnx.load(path)
            modes = [a.i for n in exported.graph.node if n.op_type == "BatchNormalization"
                     for a in n.attribute if a.name == "training_mode"] or [0]
            assert modes == [int(mode == "training")], (mode, modes)
            # A training-mode export's trace ran one forward pass, which moved the running
            # statistics: the file gets the initial ones back.
            fresh = make()
            initial = {"bn.running_mean": fresh.bn.running_mean.numpy(),
                       "bn.running_var": fresh.bn.running_var.numpy()}
            for i, t in enumerate(exported.graph.initializer):
                if t.name in initial:
                    exported.graph.initializer[i].CopyFrom(
                        onnx.numpy_helper.from_array(initial.pop(t.name), t.name))
            assert not initial, "the export has no initializers %s" % list(initial)
            onnx.save(exported, path)
            for target in targets:
                what = "%s export, %s" % (mode, target)
                out = p("trained-%s-%s.onnx" % (mode, target))
                r = subprocess.run(
                    [nnc, "train", path, "--inputs", p("x.npy"), "--labels", p("y.npy"),
                     "--loss", "softmax_cross_entropy", "--optimizer", "sgd", "--lr", "0.1",
                     "--batch", str(BATCH), "--no-shuffle", "--threads", "1", "--target",
                     target, "--output", out, "--json"], capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append("%s: nnc train exited %d:\n%s" % (what, r.returncode, r.stderr))
                    continue
                ours = json.loads(r.stdout)["losses"]
                worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
                print("%s: largest relative loss difference %.2e (bar 1e-4)" % (what, worst))
                if len(ours) != STEPS or not worst <= 1e-4:
                    failures.append("%s: losses %s, PyTorch's %s" % (what, ours, theirs))
                trained = {t.name: onnx.numpy_helper.to_array(t)
                           for t in onnx.load(out).graph.initializer}
                for name, want in stats.items():
                    got = trained[name]
                    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                    print("%s: %s relative difference %.2e (bar 1e-5)" % (what, name, err))
                    if not err <= 1e-5:
                        failures.append("%s: %s %s, PyTorch's %s" % (what, name, got, want))
                if mode != "eval":
                    continue  # a training_mode=1 model runs with batch statistics
                outdir = p("out-%s" % target)
                r = subprocess.run([nnc, "run", out, "--input", "x=" + p("xtest.npy"),
                                    "--output-dir", outdir, "--output-format", "npy", "-q"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append("%s: nnc run exited %d:\n%s" % (what, r.returncode, r.stderr))
                    continue
                got = np.load(os.path.join(outdir, "output_0.npy"))
                err = float(np.max(np.abs(got - expected_out)) / np.max(np.abs(expected_out)))
                print("%s: eval outputs relative difference %.2e (bar 1e-4)" % (what, err))
                if not err <= 1e-4:
                    failures.append("%s: eval outputs %s, PyTorch's %s" % (what, got, expected_out))
        failures += dropout_failures(nnc, d, np, torch)
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    print("PASS")
    return 0


def dropout_failures(nnc, d, np, torch):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                            torch.nn.Linear(32, CLASSES))
    m.train()
    path = os.path.join(d, "dropout.onnx")
    torch.onnx.export(m, (torch.zeros(BATCH, 16),), path, input_names=["x"],
                      output_names=["logits"], opset_version=15,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    rng = np.random.default_rng(2)
    xs = np.tile(rng.standard_normal((BATCH, 16)).astype(np.float32), (6, 1))
    np.save(os.path.join(d, "dx.npy"), xs)
    np.save(os.path.join(d, "dy.npy"), np.zeros(len(xs), np.int64))

    def losses(seed):
        r = subprocess.run(
            [nnc, "train", path, "--inputs", os.path.join(d, "dx.npy"), "--labels",
             os.path.join(d, "dy.npy"), "--optimizer", "sgd", "--lr", "0", "--batch", str(BATCH),
             "--no-shuffle", "--seed", str(seed), "--output", os.path.join(d, "dropout-out.onnx"),
             "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            return "nnc train exited %d:\n%s" % (r.returncode, r.stderr)
        return json.loads(r.stdout)["losses"]

    a, b, c = losses(1), losses(1), losses(2)
    for v in (a, c):
        if isinstance(v, str):
            return ["dropout: " + v]
    print("dropout: losses with seed 1 %s, seed 2 %s" % (["%.4f" % v for v in a],
                                                           ["%.4f" % v for v in c]))
    failures = []
    if len(set(a)) != len(a):
        failures.append("dropout: a mask repeated, losses %s" % a)
    if a != b:
        failures.append("dropout: seed 1 gave %s, then %s" % (a, b))
    if a == c:
        failures.append("dropout: seeds 1 and 2 both gave %s" % a)
    return failures


if __name__ == "__main__":
    sys.exit(main())
