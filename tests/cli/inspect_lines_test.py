#!/usr/bin/env python3
"""`nnc inspect` stays readable: on the bundled tiny_cnn and the six shared models, no mode
that prints IR, plans or kernels writes a line over 1,000 characters, because constants of
more than 16 elements are elided (`dense_resource<__elided__> : TYPE`). With
`--full-constants` the weights are there in full (as hex, lines far over 1,000 characters on
LeNet), and that text parses back: `nnc-opt` reads it and prints it unchanged.

Usage: inspect_lines_test.py NNC NNC_OPT SHARED_DIR SOURCE_DIR. The shared models are
skipped, and said so, when SHARED_DIR has none; tiny_cnn is always checked.
"""
import os
import subprocess
import sys

LIMIT = 1000
SHARED_MODELS = ["lenet_b1", "lenet_b32", "mlp_b1", "mlp_b32", "resnet18_b1", "bert_layer_b1"]
# Each mode of `nnc inspect` the README documents (--llvm and --asm on the small models only:
# they optimize every kernel with LLVM, minutes on the large ones on a busy host).
MODES = [
    [],
    ["--after=import"],
    ["--print-ir-after-all"],
    ["--format=dot"],
    ["--format=json"],
    ["--plan"],
    ["--plan", "--json"],
    ["--kernels"],
    ["--templates"],
    ["--print-pipeline"],
]
SMALL_MODES = [["--kernels", "--llvm"], ["--kernels", "--asm"]]


def run(cmd, stdin=None):
    p = subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=900)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:500]}")
    return p.stdout


def longest(text):
    return max((len(line) for line in text.splitlines()), default=0)


def main():
    nnc, nnc_opt, shared, src = sys.argv[1:5]
    models = {"tiny_cnn": os.path.join(src, "examples", "models", "tiny_cnn", "model.onnx")}
    shared_dir = os.path.join(shared, "models")
    if all(os.path.isfile(os.path.join(shared_dir, m, "model.onnx")) for m in SHARED_MODELS):
        for m in SHARED_MODELS:
            models[m] = os.path.join(shared_dir, m, "model.onnx")
    else:
        print(f"SKIP: the six shared models (not in {shared_dir}); tiny_cnn only")
    failures = []
    for name, path in models.items():
        modes = MODES + (SMALL_MODES if name in ("tiny_cnn", "lenet_b1", "mlp_b1") else [])
        for mode in modes:
            try:
                out = run([nnc, "inspect", path] + mode)
            except AssertionError as e:
                failures.append(str(e))
                continue
            n = longest(out)
            what = f"nnc inspect {name} {' '.join(mode)}".rstrip()
            if n > LIMIT:
                failures.append(f"{what}: a line of {n} characters")
            else:
                print(f"ok: {what}: longest line {n}")
        # In full: the weights are there, and the text parses back to the same text.
        full = run([nnc, "inspect", path, "--after=import", "--full-constants"])
        elided = run([nnc, "inspect", path, "--after=import"])
        if "dense_resource<__elided__>" in full:
            failures.append(f"{name}: --full-constants still elides")
        if full.count("\n") != elided.count("\n"):
            failures.append(f"{name}: --full-constants printed another graph")
        if name == "lenet_b1" and longest(full) <= LIMIT:
            failures.append(f"lenet_b1 --full-constants: longest line {longest(full)}, "
                            f"expected its weights' hex over {LIMIT}")
        if "dense_resource<__elided__>" not in elided and longest(full) > LIMIT:
            failures.append(f"{name}: nothing elided by default")
        try:
            back = run([nnc_opt, "-", "--verify-input=true"], stdin=full)
            if back != full:
                failures.append(f"{name}: nnc-opt does not print --full-constants' text back "
                                "unchanged")
        except AssertionError as e:
            failures.append(f"{name}: --full-constants text does not parse back: {e}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
