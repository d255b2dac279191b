#!/usr/bin/env python3
"""A YOLO-style detector (scripts/make_yolo_head.py: SiLU convs, upsample, concat, three
detect-head 1x1 convs and the box decode in the graph) through the nnc CLI (issue 50).

The grouping, on the CPU's and a GPU's pipelines (`nnc inspect`): no fusion group holds a conv
or matmul together with a view (a concat, slice, transpose, reshape or layout conversion), so
every conv runs in its template; each head's sigmoid, behind the head's reshape and transpose,
runs in its conv's group (the epilogue); each scale's decode concat roots a group of its own.
The numbers: the outputs on the CPU (1 and 2 threads) and on OpenCL (where a device is found;
PoCL in CI) match the reference interpreter's.

Usage: detect_head_test.py NNC_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

NNC = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIEWS = {"concat", "slice", "transpose", "reshape", "flatten", "squeeze", "unsqueeze",
         "to_nchwc", "from_nchwc", "gather"}
ANCHORS = {"conv", "conv_nchwc", "matmul", "winograd_output"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def nnc(args):
    return subprocess.run([NNC] + args, capture_output=True, text=True, timeout=900)


def groups_of(ir):
    """{group id: [(result name, op)]} from the text IR."""
    groups = {}
    for line in ir.splitlines():
        m = re.match(r"\s*%(\S+) = ([a-z_0-9]+)\(.*fusion_group = (\d+)", line)
        if m:
            groups.setdefault(int(m.group(3)), []).append((m.group(1), m.group(2)))
    return groups


def check_grouping(model, target):
    r = nnc(["inspect", model, "--target", target])
    check(r.returncode == 0, "inspect --target %s: %s" % (target, r.stderr))
    groups = groups_of(r.stdout)
    heads = 0
    for gid, members in groups.items():
        ops = [op for _, op in members]
        anchored = [op for op in ops if op in ANCHORS]
        views = [op for op in ops if op in VIEWS]
        check(not (anchored and views),
              "%s: group %d holds %s with views %s" % (target, gid, anchored, views))
        if anchored and "sigmoid" in ops and "mul" not in ops:
            heads += 1  # a head conv with its hoisted sigmoid (SiLU convs have a mul too)
    check(heads == 3, "%s: %d head convs run their sigmoid as an epilogue, want 3" % (target, heads))
    decode_roots = [m[-1] for m in groups.values() if m[-1][1] == "concat"]
    # Three per-scale decode concats and the outer one over the scales.
    check(len(decode_roots) == 4, "%s: groups rooted at a concat: %s" % (target, decode_roots))


with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_yolo_head.py"), tmp,
                    "--size", "64", "--width", "8"], check=True)
    model = os.path.join(tmp, "model.onnx")
    inputs = os.path.join(tmp, "test_data_set_0")
    check_grouping(model, "cpu")
    check_grouping(model, "opencl")

    ref = os.path.join(tmp, "interp")
    r = nnc(["run", model, "--inputs-dir", inputs, "--output-dir", ref, "--target", "interp", "-q"])
    check(r.returncode == 0, "interp: %s" % r.stderr)
    for threads in ("1", "2"):
        r = nnc(["run", model, "--inputs-dir", inputs, "--expected-dir", ref, "--threads", threads])
        check(r.returncode == 0 and "all 1 outputs match" in r.stdout,
              "cpu, %s thread(s): %s%s" % (threads, r.stdout, r.stderr))
    if "opencl:0.0" in nnc(["devices"]).stdout:
        r = nnc(["run", model, "--inputs-dir", inputs, "--expected-dir", ref, "--target", "opencl"])
        check(r.returncode == 0 and "all 1 outputs match" in r.stdout,
              "opencl: %s%s" % (r.stdout, r.stderr))
    else:
        print("SKIPPED the OpenCL run: no OpenCL device on this machine")

if failures:
    sys.exit("%d failure(s)" % len(failures))
print("detect head: grouping and outputs OK")
