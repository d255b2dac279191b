#!/usr/bin/python3
"""PyTorch peer for bench/peers.py: one shared model, timed the way `nnc bench --json` is.

The model is rebuilt from the definitions in /work/shared/models/make_models.py (its
`build(name)`: the same architecture, the same seed, hence the same weights and input the
ONNX file was exported with). That this is the exported model is checked, not assumed: the
output is compared with the folder's test_data_set_0/output_0.pb (PyTorch's output at export),
and the largest difference is printed (max_abs_diff).

    /usr/bin/python3 bench/peers_torch.py MODEL_DIR [--threads N] [--iterations K]
                                          [--warmup W] [--mode eager|script] [--matmul N]

--mode script: TorchScript (torch.jit.trace, then torch.jit.freeze). --matmul N times
torch.matmul of two NxN f32 matrices instead (GFLOP/s). Prints one JSON line. Runs with
Debian's python3-torch (hence /usr/bin/python3). A benchmark, not a test.
"""
import argparse
import json
import os
import statistics
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench.stats import time_calls  # noqa: E402


def read_varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def read_tensor_pb(path):
    """dims and float data of an ONNX TensorProto (float_data or raw_data)."""
    b = open(path, "rb").read()
    i, dims, raw, floats = 0, [], None, []
    while i < len(b):
        key, i = read_varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(b, i)
            if field == 1:
                dims.append(v)
        elif wire == 2:
            n, i = read_varint(b, i)
            chunk = b[i:i + n]
            i += n
            if field == 1:  # packed dims
                j = 0
                while j < len(chunk):
                    v, j = read_varint(chunk, j)
                    dims.append(v)
            elif field == 9:
                raw = chunk
            elif field == 4:  # packed float_data
                floats = list(struct.unpack("<%df" % (len(chunk) // 4), chunk))
        elif wire == 5:
            v = struct.unpack("<f", b[i:i + 4])[0]
            i += 4
            if field == 4:
                floats.append(v)
        elif wire == 1:
            i += 8
        else:
            raise ValueError("%s: unsupported wire type %d" % (path, wire))
    if raw is not None:
        floats = list(struct.unpack("<%df" % (len(raw) // 4), raw))
    return dims, floats


def timed(fn, iterations, warmup):
    """(median, min) in ms of `iterations` calls after `warmup` untimed ones."""
    times = time_calls(fn, iterations, warmup)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", nargs="?")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--mode", choices=["eager", "script"], default="eager")
    ap.add_argument("--matmul", type=int, default=0)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    out = {"peer": "torch-" + a.mode, "torch_version": torch.__version__, "threads": a.threads}
    if a.matmul:
        n = a.matmul
        x = torch.randn(n, n)
        w = torch.randn(n, n)
        with torch.inference_mode():
            med, best = timed(lambda: torch.matmul(x, w), a.iterations, a.warmup)
        out.update({"peer": "torch-matmul", "n": n, "median_ms": med, "min_ms": best,
                    "gflops": 2 * n ** 3 / (med * 1e-3) / 1e9})
        print(json.dumps(out))
        return 0
    if not a.model_dir:
        ap.error("MODEL_DIR is needed (or --matmul N)")
    models = os.path.dirname(os.path.abspath(a.model_dir))
    sys.path.insert(0, models)
    import make_models  # noqa: E402  (the shared models' own definitions)
    name = os.path.basename(os.path.abspath(a.model_dir))
    model, x, _ = make_models.build(name)
    dims, expected = read_tensor_pb(os.path.join(a.model_dir, "test_data_set_0", "output_0.pb"))
    in_dims, in_data = read_tensor_pb(os.path.join(a.model_dir, "test_data_set_0", "input_0.pb"))
    x_file = torch.tensor(in_data, dtype=torch.float32).reshape(in_dims)
    with torch.inference_mode():
        if a.mode == "script":
            model = torch.jit.freeze(torch.jit.trace(model, (x_file,)))
        y = model(x_file)
        diff = (y.reshape(-1) - torch.tensor(expected)).abs().max().item()
        med, best = timed(lambda: model(x_file), a.iterations, a.warmup)
    out.update({"model": name, "median_ms": med, "min_ms": best, "max_abs_diff": diff,
                "weights": "make_models.build(%r) (seed %d), checked against output_0.pb"
                           % (name, make_models.SEED),
                "input_matches_export": bool((x.reshape(-1) - x_file.reshape(-1)).abs().max()
                                             .item() == 0.0)})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
