"""`nnc train` end to end: an MLP 64-128-10 on 80% of scikit-learn's digits (Adam, lr 0.001,
batch 32, 30 epochs), then `nnc run` on the trained model classifies >= 95% of the held-out
20%. Also the CLI's errors: labels of the wrong dtype, an unknown loss or optimizer, a model
without initializers, a batch larger than the data.

Skipped (exit 77, said so) when the digits file (Debian python3-sklearn) is absent.
Usage: train_test.py NNC
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import train_data as td  # noqa: E402
from onnxw import model, node, value_info  # noqa: E402

NNC = sys.argv[1]


def run(args, expect_ok=True):
    p = subprocess.run([NNC] + args, capture_output=True, text=True, timeout=900)
    if expect_ok and p.returncode != 0:
        sys.exit("FAIL: nnc %s\n%s%s" % (" ".join(args), p.stdout, p.stderr))
    return p


def expect_error(args, needle):
    p = run(args, expect_ok=False)
    if p.returncode == 0 or needle not in p.stderr:
        sys.exit("FAIL: expected an error containing %r from nnc %s, got exit %d:\n%s%s"
                 % (needle, " ".join(args), p.returncode, p.stdout, p.stderr))
    if "internal error" in p.stderr or p.returncode < 0:
        sys.exit("FAIL: nnc %s crashed:\n%s" % (" ".join(args), p.stderr))


def main():
    if not os.path.exists(td.DIGITS):
        print("SKIP: %s is absent (install python3-sklearn)" % td.DIGITS)
        return 77
    xs, ys = td.load_digits()
    xtr, ytr, xte, yte = td.split(xs, ys)
    sizes = [64, 128, 10]
    with tempfile.TemporaryDirectory() as d:
        p = lambda n: os.path.join(d, n)  # noqa: E731
        td.write_npy(p("xtr.npy"), [v for r in xtr for v in r], [len(xtr), 64])
        td.write_npy(p("ytr.npy"), ytr, [len(ytr)], "i8")
        td.write_npy(p("xte.npy"), [v for r in xte for v in r], [len(xte), 64])
        with open(p("mlp.onnx"), "wb") as f:
            f.write(td.mlp_model(sizes, td.init_mlp(sizes, seed=0)))

        common = ["--inputs", p("xtr.npy"), "--labels", p("ytr.npy"), "--loss",
                  "softmax_cross_entropy", "--optimizer", "adam", "--lr", "0.001", "--batch", "32"]
        r = run(["train", p("mlp.onnx")] + common +
                ["--epochs", "30", "--seed", "1", "--output", p("trained.onnx"), "--json"])
        if "epoch 30/30" not in r.stderr or "samples/s" not in r.stderr or "ETA" not in r.stderr:
            sys.exit("FAIL: no progress line on stderr:\n" + r.stderr)
        res = json.loads(r.stdout)
        losses = res["losses"]
        steps = 30 * (len(xtr) // 32)
        assert len(losses) == steps, (len(losses), steps)
        assert res["median_step_ms"] > 0 and res["final_loss"] == losses[-1]
        first, last = sum(losses[:20]) / 20, sum(losses[-44:]) / 44
        print("loss: first 20 steps %.4f, last epoch %.4f, median step %.3f ms"
              % (first, last, res["median_step_ms"]))
        assert last < first / 5, (first, last)

        run(["run", p("trained.onnx"), "--input", "x=" + p("xte.npy"), "--output-dir", p("out"),
             "--output-format", "npy", "-q"])
        logits, shape = td.read_npy(os.path.join(p("out"), "output_0.npy"))
        assert shape == [len(xte), 10], shape
        correct = sum(1 for i, y in enumerate(yte)
                      if max(range(10), key=lambda c: logits[i * 10 + c]) == y)
        acc = correct / len(yte)
        print("held-out accuracy %.4f (%d/%d)" % (acc, correct, len(yte)))
        if acc < 0.95:
            sys.exit("FAIL: accuracy %.4f < 0.95" % acc)

        # Errors: one clear message and a non-zero exit each.
        td.write_npy(p("yf.npy"), [float(v) for v in ytr], [len(ytr)])
        bad_labels = ["--inputs", p("xtr.npy"), "--labels", p("yf.npy"), "--output", p("o.onnx")]
        expect_error(["train", p("mlp.onnx")] + bad_labels, "labels are f32")
        expect_error(["train", p("mlp.onnx")] + common[:4] + ["--loss", "hinge", "--output",
                                                               p("o.onnx")], "unknown loss 'hinge'")
        expect_error(["train", p("mlp.onnx")] + common[:4] + ["--optimizer", "lamb", "--output",
                                                               p("o.onnx")], "unknown optimizer")
        expect_error(["train", p("mlp.onnx")] + common[:4] + ["--batch", "5000", "--output",
                                                               p("o.onnx")], "--batch 5000")
        with open(p("noinit.onnx"), "wb") as f:
            f.write(model([node("Relu", ["x"], ["y"], "r")], [value_info("x", ["N", 64])],
                          [value_info("y", ["N", 64])]))
        expect_error(["train", p("noinit.onnx")] + common[:4] + ["--output", p("o.onnx")],
                     "no initializers")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
