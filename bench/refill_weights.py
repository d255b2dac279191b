#!/usr/bin/env python3
"""Carry a model to a machine for timing only, without its weights.

    refill_weights.py strip IN.onnx OUT.onnx   # large float initializers become zeros
    refill_weights.py fill  IN.onnx OUT.onnx   # ...and random again, with their statistics
    refill_weights.py tile  IN.onnx OUT.onnx   # random of each one's statistics, in a short period

`strip` zeroes every float initializer of at least --min-elements elements (small ones and every
integer one, shapes and axes among them, stay exact) and writes each one's mean and standard
deviation into the model's metadata (key nnc.refill), so the stripped file compresses to almost
nothing. `fill` draws those initializers again from a normal distribution with the recorded
statistics (seeded, so two fills agree). The filled model computes the same graph on values of
the same scale: right for timing, wrong for comparing outputs with the original's test data.
`tile` does both at once on an original model: each large float initializer becomes one block of
--period values drawn with its own mean and deviation, repeated; what is compiled from it (an
`nnc compile --emit=lib` artifact, weights inside) compresses to almost nothing too.

Used to time the shared models on a lent GPU machine, which takes at most 64 MiB of files
(resnet18's weights alone are 46 MB). Needs the `onnx` and `numpy` modules.
"""
import argparse
import json
import sys

# numpy and onnx are imported after the options are read, so that --help needs neither.
np = onnx = numpy_helper = None

KEY = "nnc.refill"


def strip(model, min_elements):
    stats = {}
    for i, t in enumerate(model.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype.kind != "f" or a.size < min_elements:
            continue
        stats[t.name] = [float(a.mean()), float(a.std())]
        z = numpy_helper.from_array(np.zeros(a.shape, a.dtype), t.name)
        model.graph.initializer[i].CopyFrom(z)
    del model.metadata_props[:]
    model.metadata_props.add(key=KEY, value=json.dumps(stats))
    return len(stats)


def fill(model, seed):
    props = {p.key: p.value for p in model.metadata_props}
    if KEY not in props:
        raise SystemExit("fill: the model has no %s metadata (not made by `strip`)" % KEY)
    stats = json.loads(props[KEY])
    rng = np.random.default_rng(seed)
    for i, t in enumerate(model.graph.initializer):
        if t.name not in stats:
            continue
        mean, std = stats[t.name]
        a = numpy_helper.to_array(t)
        r = rng.normal(mean, std, a.shape).astype(a.dtype)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(r, t.name))
    return len(stats)


def tile(model, seed, min_elements, period):
    rng = np.random.default_rng(seed)
    n = 0
    for i, t in enumerate(model.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype.kind != "f" or a.size < min_elements:
            continue
        block = rng.normal(float(a.mean()), float(a.std()), period).astype(a.dtype)
        r = np.resize(block, a.shape)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(r, t.name))
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["strip", "fill", "tile"])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--min-elements", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--period", type=int, default=4093, help="tile: values per repeated block")
    a = ap.parse_args()
    global np, onnx, numpy_helper
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(a.input)
    if a.mode == "strip":
        n = strip(model, a.min_elements)
    elif a.mode == "fill":
        n = fill(model, a.seed)
    else:
        n = tile(model, a.seed, a.min_elements, a.period)
    onnx.save(model, a.output)
    print("%s: %s %d initializers -> %s" % (a.input, a.mode, n, a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
