#!/usr/bin/env python3
"""PyTorch QAT exports (QuantizeLinear/DequantizeLinear pairs) against PyTorch's fake-quant
output, through `nnc run`.

bench/qdq_models.py exports its two small CNNs (a LeNet-like net with its conv and Linear
inputs quantized; an inverted-residual net with torch.ao's FX QAT placement, residual add
included): BN folded, per-channel int8 weights, per-tensor uint8 activations calibrated on
random batches, opset 13. Each runs on cpu, with --cpu x86-64-v3 and on the interpreter; the
largest difference from PyTorch's output must be at most 2e-3 of the output's range (issue 47's
bar for small models) with the same top-1 class. Needs PyTorch (Debian's python3-torch, for
/usr/bin/python3); without it the test says so and is skipped (77).

Usage: qdq_torch_test.py NNC_BINARY [--keep DIR]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
import qdq_models  # noqa: E402

SMALL = [n for n, (_, _, size, _) in qdq_models.MODELS.items() if size == "small"]


def main():
    nnc = sys.argv[1]
    keep = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--keep" else None
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError as e:
        print("SKIPPED: PyTorch is not installed for %s (%s)" % (sys.executable, e))
        return 77
    torch.set_num_threads(1)
    work = keep or tempfile.mkdtemp(prefix="nnc-qdq-torch-")
    failures = []
    for name, err in qdq_models.export(SMALL, work, force=True).items():
        if err:
            failures.append("%s: %s" % (name, err))
            continue
        # Without Q/DQ pairs in the export the check below would compare float with float.
        with open(os.path.join(work, name, "model.onnx"), "rb") as f:
            onnx = f.read()
        if onnx.count(b"QuantizeLinear") < 2 or onnx.count(b"DequantizeLinear") < 2:
            failures.append("%s: the export holds no QuantizeLinear/DequantizeLinear pairs"
                            % name)
    env = {"NNC_CACHE_DIR": os.path.join(work, "cache")}
    rows, ok = qdq_models.check(nnc, [n for n in SMALL if not any(
        f.startswith(n + ":") for f in failures)], work, ["cpu", "interp"], env)
    if len(rows) != 3 * len(SMALL):
        failures.append("checked %d (model, target) pairs, expected %d" % (len(rows),
                                                                          3 * len(SMALL)))
    failures += ["%s on %s: %s" % (r["model"], r["target"], r.get("error") or
                                   "max error / range %.2e over %g, top-1 %s" % (
                                       r["rel"], r["bar"], r["top1"]))
                 for r in rows if not r.get("ok")]
    for f in failures:
        print("FAIL", f)
    return 1 if failures or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
