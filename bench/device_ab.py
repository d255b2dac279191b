#!/usr/bin/env python3
"""Kernel configs A/B on a lent machine: each variant against ONNX Runtime, in one process.

Runs where bench/device_bundle.sh's folder was carried (with ONNX Runtime's C library in the
bundle, ORT_LIBRARY=...) after bench/device_cpu.py unpacked it into --work. For one model it
records the target's default configs in a tuning cache there (`nnc tune --budget 0.001`, which
keeps each default without trying another), derives one cache per variant by changing knobs of
the matching records, then times every cache with `nnc bench --cache V --compare ort`: nnc and
ORT alternate run by run, so the shared host's slow minutes slow both. ORT is the common
reference here, not a peer being compared (so in nnc's process, its spinning off: the
peer comparison is device_cpu.py's): a variant's ratio to ORT divided by the defaults' ratio
in the same repetition says what the variant changes, without comparing runs taken minutes
apart.

    python3 device_ab.py --model vit_b_16 --kind gemm_cpu --match "m197 " \\
        --variant kc256:kc=0:kc=256 --variant mr12::mr=12 [--threads 1,2] [--reps 2]

A variant is NAME:FROM:TO; FROM and TO are ';'-separated knob=value lists. A record of --kind
whose signature holds every --match string and whose config has FROM's values gets TO's. A
benchmark, not a test: it reports figures and asserts nothing.
"""
import argparse
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nncbench import nnc as nncb, proc  # noqa: E402
from nncbench.device import bundle_nnc, make_log, pin_cores  # noqa: E402
from nncbench.stats import median  # noqa: E402


def knobs(text):
    return dict(kv.split("=") for kv in text.split(";") if kv) if text else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/tmp/nnc-device", help="where device_cpu.py unpacked")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/device-ab"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--kind", default="gemm_cpu")
    ap.add_argument("--match", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--budget", type=float, default=300, help="seconds; no run starts later")
    args = ap.parse_args()
    deadline = time.time() + args.budget
    os.makedirs(args.out, exist_ok=True)
    log = make_log(os.path.join(args.out, "ab.txt"))
    threads = [int(t) for t in args.threads.split(",")]
    pin_cores(threads)
    b = os.path.join(args.work, "b")
    nnc = bundle_nnc(b)
    env = {"NNC_ORT_LIBRARY": os.path.join(b, "ort", "libonnxruntime.so.1")}
    d = os.path.join(args.work, "m", args.model)
    path, inp = os.path.join(d, "filled.onnx"), os.path.join(d, "input.npy")
    if not os.path.exists(path):
        sys.exit("device_ab: no %s (device_cpu.py refills it)" % path)
    import onnx
    g = onnx.load(path, load_external_data=False).graph
    fed = {t.name for t in g.initializer}
    name = next(i.name for i in g.input if i.name not in fed)

    caches = {}
    base = os.path.join(args.out, "defaults.db")
    if os.path.exists(base):
        os.remove(base)
    for t in threads:
        rc, _, err = proc.run(nnc + ["tune", path, "--threads", str(t), "--budget", "0.001",
                                     "-q", "--cache", base], env)
        if rc:
            sys.exit("device_ab: nnc tune failed: " + err[-500:])
    caches["defaults"] = base
    con = sqlite3.connect(base)
    rows = con.execute("select kind, signature, device, config from tuning").fetchall()
    con.close()
    for spec in args.variant:
        vname, frm, to = spec.split(":")
        frm, to = knobs(frm), knobs(to)
        p = os.path.join(args.out, vname + ".db")
        with open(base, "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        c = sqlite3.connect(p)
        changed = 0
        for kind, sig, dev, cfg in rows:
            kv = dict(x.split("=") for x in cfg.split(","))
            if kind != args.kind or not all(m in sig for m in args.match):
                continue
            if any(kv.get(k) != v for k, v in frm.items()):
                continue
            kv.update(to)
            c.execute("update tuning set config=? where kind=? and signature=? and device=?",
                      (",".join("%s=%s" % (k, kv[k]) for k in sorted(kv)), kind, sig, dev))
            changed += 1
        c.commit()
        c.close()
        log("variant %s: %d records changed" % (vname, changed))
        caches[vname] = p
    for kind, sig, dev, cfg in rows:
        if kind == args.kind and all(m in sig for m in args.match):
            log("default  %-70s %s  [%s]" % (sig[:70], cfg, dev.split("|")[-1].strip()))

    ratios = {}
    for rep in range(args.reps):
        for t in threads:
            for vname, p in caches.items():
                if time.time() > deadline:
                    log("budget spent before rep %d %dT %s" % (rep, t, vname))
                    break
                rep_json, err = nncb.bench(nnc, path, t, args.iterations, 2,
                                           ["--input", name + "=" + inp, "--cache", p,
                                            "--compare", "ort"], env)
                if err:
                    log("rep %d %dT %s failed: %s" % (rep, t, vname, err[-300:]))
                    continue
                ratio = rep_json["ratio"]
                ratios.setdefault((t, vname), {})[rep] = ratio
                log("rep %d %dT %-10s nnc %8.2f ms  ort %8.2f ms  nnc/ort %.3f  tuned %s" %
                    (rep, t, vname, rep_json["median_ms"], rep_json["ort_median_ms"], ratio,
                     rep_json.get("tuned_kernels")))
    log("\nper variant: nnc/ort per repetition, and its ratio to the defaults' in the same one")
    for (t, vname), per in sorted(ratios.items()):
        basis = ratios.get((t, "defaults"), {})
        rel = [per[k] / basis[k] for k in per if k in basis]
        log("%dT %-10s nnc/ort %s  /defaults %s  median %.3f" % (
            t, vname, ["%.3f" % per[k] for k in sorted(per)], ["%.3f" % x for x in rel],
            median(rel) if rel else float("nan")))


if __name__ == "__main__":
    main()
