#!/usr/bin/env python3
"""A GPT-2-style decoder LM (issue 50's kind) against ONNX Runtime: full sequences and KV-cache steps.

The model: token and position embeddings, 6 pre-LN blocks (d 512, 8 heads, causal attention,
MLP 2048 with GELU), a final LayerNorm and the LM head tied to the token embedding (vocab
8000), exported by Debian's PyTorch 1.13 (random weights from a fixed seed, opset 13). Cases:
  - `full_tT`: the whole prompt of T tokens (T = 1, 16, 64), logits [1, T, vocab];
  - `kv_pP`: one token with a KV cache of P past positions per layer (P = 15, 127): inputs
    the token and each layer's past keys and values [1, 8, P, 64]; outputs the logits
    [1, 1, vocab] and the present keys and values [1, 8, P + 1, 64].
For each case:
  1. PyTorch computes the reference logits; `nnc run` computes them too and the largest error
     relative to their range is reported;
  2. `nnc bench --json` and ONNX Runtime (its own process, its default spinning pool:
     nncbench.ort) time it at each thread count, alternating, the order flipping every round;
     each figure is the median of the runs' medians. At 1 thread each engine also reports its
     process's CPU time per run (`median_cpu_ms`): on a host shared with other work that
     figure leaves out the scheduler's waits, which the wall clock charges to whoever waited.
  3. The weight-streaming time of a KV step: the bytes of the weights its matmuls read
     (every weight but the embedding tables, of which a step gathers one row) over the
     larger of nnc's measured bandwidth (`nnc bench --profile`'s peak line) and STREAM's
     (build/bench/nnc_stream, best of its kernels' medians), and the step's nnc/streaming
     ratio, by the wall clock and (1 thread) by CPU time.

    /usr/bin/python3 bench/decoder_lm.py [--nnc build/tools/nnc/nnc] [--threads 1,2]
        [--rounds 3] [--only full_t16,kv_p15] [--work DIR] [--out FILE.md]

Writes bench/results/decoder-lm.md (and .json); a partial run (--only) belongs elsewhere
(--out). A benchmark, not a test: it reports figures, it asserts nothing.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import machine, nnc, ort, proc, report  # noqa: E402
from nncbench.stats import median, order  # noqa: E402

VOCAB, D, HEADS, LAYERS, FF, POSITIONS = 8000, 512, 8, 6, 2048, 1024
# case -> (tokens T, past P, iterations at 1 thread)
CASES = {
    "full_t1": (1, 0, 60),
    "full_t16": (16, 0, 40),
    "full_t64": (64, 0, 20),
    "kv_p15": (1, 15, 60),
    "kv_p127": (1, 127, 60),
}


def build_model(tokens, past):
    import torch
    import torch.nn as nn

    hd = D // HEADS

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
            # Query t (position past + t) sees keys 0 .. past + t.
            mask = torch.full((tokens, past + tokens), float("-inf"))
            mask = torch.triu(mask, diagonal=past + 1)
            self.register_buffer("mask", mask)

        def forward(self, x, pk=None, pv=None):
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            heads = lambda t: t.reshape(1, tokens, HEADS, hd).transpose(1, 2)  # noqa: E731
            q, k, v = heads(q), heads(k), heads(v)
            if pk is not None:
                k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
            att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + self.mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(1, tokens, D)
            x = x + self.proj(y)
            x = x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
            return x, k, v

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Embedding(POSITIONS, D)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.lnf = nn.LayerNorm(D)
            self.register_buffer("pos", torch.arange(past, past + tokens).unsqueeze(0))

        def forward(self, ids, *pasts):
            x = self.wte(ids) + self.wpe(self.pos)
            presents = []
            for i, b in enumerate(self.blocks):
                x, k, v = b(x, *(pasts[2 * i:2 * i + 2] if pasts else ()))
                presents += [k, v]
            logits = self.lnf(x) @ self.wte.weight.t()  # the tied LM head
            return (logits, *presents) if pasts else logits

    return Decoder()


def export(name, work):
    """Writes work/name/{model.onnx, NAME.npy inputs, expected.npy}; returns (folder, feeds,
    error)."""
    import numpy as np
    import torch
    tokens, past, _ = CASES[name]
    folder = os.path.join(work, name)
    names = ["ids"] + ["past_%s%d" % (kv, i) for i in range(LAYERS) for kv in "kv"][
        :2 * LAYERS if past else 0]
    feeds = ["%s=%s" % (n, os.path.join(folder, n + ".npy")) for n in names]
    if all(os.path.exists(os.path.join(folder, f)) for f in ("model.onnx", "expected.npy")):
        return folder, feeds, None
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    model = build_model(tokens, past).eval()
    ids = torch.randint(0, VOCAB, (1, tokens), dtype=torch.int64)
    args = [ids] + [torch.randn(1, HEADS, past, D // HEADS) for _ in range(2 * LAYERS if past
                                                                             else 0)]
    with torch.no_grad():
        out = model(*args)
    logits = out[0] if past else out
    outputs = ["logits"] + (["present_%s%d" % (kv, i) for i in range(LAYERS) for kv in "kv"]
                            if past else [])
    try:
        torch.onnx.export(model, tuple(args), os.path.join(folder, "model.onnx"),
                          input_names=names, output_names=outputs, opset_version=13,
                          do_constant_folding=True)
    except Exception as ex:  # reported, not fatal
        return folder, feeds, "export failed: %s" % str(ex).strip().splitlines()[0][:200]
    for n, a in zip(names, args):
        np.save(os.path.join(folder, n + ".npy"), a.numpy())
    np.save(os.path.join(folder, "expected.npy"), logits.numpy())
    return folder, feeds, None


def check_output(nnc_path, folder, feeds, env):
    """Runs nnc once; returns (max error of the logits relative to their range, error text)."""
    import numpy as np
    out = os.path.join(folder, "nnc_out")
    cmd = [nnc_path, "run", os.path.join(folder, "model.onnx"), "--output-dir", out,
           "--output-format", "npy", "-q"]
    for f in feeds:
        cmd += ["--input", f]
    rc, _, err = proc.run(cmd, env)
    if rc != 0:
        return None, proc.last_line(err)
    got = np.load(os.path.join(out, "output_0.npy")).astype(np.float64)
    want = np.load(os.path.join(folder, "expected.npy")).astype(np.float64)
    if got.shape != want.shape:
        return None, "shape %s, PyTorch's %s" % (got.shape, want.shape)
    span = float(want.max() - want.min()) or 1.0
    return float(np.abs(got - want).max()) / span, None


def streamed_bytes():
    """Bytes of the weights one KV step's matmuls read: everything but the two embedding
    tables (a step gathers one row of each; the LM head is the token table's transpose,
    a weight of its own in the export)."""
    per_layer = (D * 3 * D + 3 * D) + (D * D + D) + (D * FF + FF) + (FF * D + D) + 4 * D
    return 4 * (LAYERS * per_layer + 2 * D + D * VOCAB)


def stream_gbps(stream, threads):
    """STREAM's best kernel on this machine (build/bench/nnc_stream: the largest of its
    kernels' median GB/s), or None."""
    if not os.access(stream, os.X_OK):
        return None
    rc, out, _ = proc.run([stream, "--elements", str(1 << 24), "--threads", str(threads),
                           "--reps", "10", "--json"])
    if rc != 0:
        return None
    rates = [r["median_gbs"] for r in proc.json_lines(out) if "median_gbs" in r]
    return max(rates) if rates else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnc", default=nnc.NNC)
    ap.add_argument("--stream", default=os.path.join(nnc.ROOT, "build", "bench", "nnc_stream"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/nnc/decoder-lm"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the iteration counts")
    ort.add_arguments(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch = proc.require_torch()
    nnc.require(args.nnc)
    peer = ort.from_arguments(args)
    if peer.missing():
        sys.exit("decoder_lm.py: " + peer.missing())
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit("unknown case(s): %s (%s)" % (", ".join(unknown), ", ".join(CASES)))
    threads = [int(t) for t in args.threads.split(",")]
    env = {"NNC_CACHE_DIR": os.environ.get("NNC_CACHE_DIR", os.path.join(args.work, "cache"))}
    torch.set_num_threads(1)
    mach = machine.describe(args.nnc)
    ort_version = None
    rows = []
    for name in names:
        row = {"case": name}
        rows.append(row)
        folder, feeds, err = export(name, args.work)
        if err:
            row["error"] = err
            print("%-10s %s" % (name, err), flush=True)
            continue
        rel, err = check_output(args.nnc, folder, feeds, env)
        if err:
            row["error"] = "nnc run: " + err
            print("%-10s nnc run failed: %s" % (name, err), flush=True)
            continue
        row["max_rel_error"] = rel
        row["nnc_ms"], row["ort_ms"], row["ratio"], row["peak_gbps"] = {}, {}, {}, {}
        row["nnc_cpu_ms"], row["ort_cpu_ms"] = {}, {}
        model = os.path.join(folder, "model.onnx")
        extra = [x for f in feeds for x in ("--input", f)]
        for t in threads:
            its = max(5, int(CASES[name][2] * args.scale))
            engines = {
                "nnc": lambda: nnc.bench(args.nnc, model, t, its, 3, extra, env),
                "ort": lambda: peer.run(model, t, its, 3, inputs=feeds),
            }
            ms = {"nnc": [], "ort": []}
            cpu = {"nnc": [], "ort": []}
            for r in range(args.rounds):
                for who in order(engines, r):
                    res, err = engines[who]()
                    if err:
                        row["error"] = "%s bench: %s" % (who, err)
                        break
                    ms[who].append(res["median_ms"])
                    if "median_cpu_ms" in res:
                        cpu[who].append(res["median_cpu_ms"])
                    ort_version = res.get("version") if who == "ort" else ort_version
                if "error" in row:
                    break
            if "error" in row:
                break
            k = str(t)
            row["nnc_ms"][k], row["ort_ms"][k] = median(ms["nnc"]), median(ms["ort"])
            row["ratio"][k] = row["nnc_ms"][k] / row["ort_ms"][k]
            if t == 1 and cpu["nnc"] and cpu["ort"]:
                row["nnc_cpu_ms"][k], row["ort_cpu_ms"][k] = median(cpu["nnc"]), median(cpu["ort"])
            prof, err = nnc.bench(args.nnc, model, t, its, 3, extra + ["--profile"], env)
            if prof:
                row["peak_gbps"][k] = prof.get("profile", prof).get("peak_gbps")
        print("%-10s err %.1e  %s" % (name, rel, "  ".join(
            "%sT nnc %.3f ms ort %.3f ms (%.2f)" % (t, row["nnc_ms"][t], row["ort_ms"][t],
                                                   row["ratio"][t]) for t in row["ratio"])),
              flush=True)

    weight_bytes = streamed_bytes()
    stream = {str(t): stream_gbps(args.stream, t) for t in threads}
    stem = os.path.splitext(report.result_path("decoder-lm", args.out))[0]
    lines = report.header("GPT-2-style decoder LM: nnc vs ONNX Runtime", mach, machine.load(), [
        "PyTorch %s export (vocab %d, d %d, %d heads, %d layers, MLP %d, tied LM head); %s." % (
            torch.__version__, VOCAB, D, HEADS, LAYERS, FF, peer.describe(ort_version))],
        python="/usr/bin/python3")
    lines += ["Each figure the median of %d run(s)' medians, nnc and ORT alternating, each in "
              "its own process." % args.rounds, ""]
    table = []
    for r in rows:
        if "ratio" not in r or len(r["ratio"]) < len(threads):
            table.append([r["case"], r.get("error", "incomplete")])
            continue
        cells = [r["case"], "%.1e" % r["max_rel_error"]]
        for t in threads:
            k = str(t)
            cells += ["%.3f" % r["nnc_ms"][k], "%.3f" % r["ort_ms"][k], "**%.2f**" % r["ratio"][k]]
        table.append(cells)
    lines += report.table(["case", "max error / range"] + [
        c for t in threads for c in ("nnc %dT ms" % t, "ORT %dT ms" % t, "nnc/ORT %dT" % t)],
        table)
    cpu_rows = [[r["case"], "%.3f" % r["nnc_cpu_ms"]["1"], "%.3f" % r["ort_cpu_ms"]["1"],
                 "**%.2f**" % (r["nnc_cpu_ms"]["1"] / r["ort_cpu_ms"]["1"])]
                for r in rows if r.get("nnc_cpu_ms", {}).get("1") and r["ort_cpu_ms"].get("1")]
    if cpu_rows:
        lines += ["", "At 1 thread by each process's CPU time per run (medians of the runs' "
                  "medians): the same runs without the scheduler's waits.", ""]
        lines += report.table(["case", "nnc 1T CPU ms", "ORT 1T CPU ms", "nnc/ORT"], cpu_rows)
    lines += ["", "Weight streaming of a KV step: its matmuls read %.1f MB of weights." %
              (weight_bytes / 1e6), ""]
    srows = []
    for r in rows:
        if not r["case"].startswith("kv_") or "ratio" not in r:
            continue
        for t in threads:
            k = str(t)
            if k not in r["nnc_ms"]:
                continue
            bw = max([b for b in (r["peak_gbps"].get(k), stream.get(k)) if b] or [0])
            if not bw:
                continue
            floor = weight_bytes / (bw * 1e6)
            cpu_ms = r.get("nnc_cpu_ms", {}).get(k)
            srows.append([r["case"], str(t), "%.1f" % (r["peak_gbps"].get(k) or 0),
                          "%.1f" % (stream.get(k) or 0), "%.3f" % floor,
                          "%.3f" % r["nnc_ms"][k], "**%.2f**" % (r["nnc_ms"][k] / floor),
                          "%.1f" % (weight_bytes / (r["nnc_ms"][k] * 1e6)),
                          "%.3f" % cpu_ms if cpu_ms else "",
                          "**%.2f**" % (cpu_ms / floor) if cpu_ms else ""])
    lines += report.table(["case", "threads", "nnc GB/s", "STREAM GB/s", "streaming ms",
                           "nnc ms", "nnc / streaming", "weights GB/s", "nnc CPU ms",
                           "CPU / streaming"], srows)
    report.write(stem + ".md", lines, {"machine": mach, "torch": torch.__version__,
                                       "rounds": args.rounds, "stream_gbps": stream,
                                       "weight_bytes": weight_bytes, "cases": rows})


if __name__ == "__main__":
    main()
