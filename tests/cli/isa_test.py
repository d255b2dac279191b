#!/usr/bin/env python3
"""The CPU ISA is nnc's choice, stated and overridable, on any x86-64 host:

- `nnc devices` names the level nnc generates code for;
- `--cpu` and `NNC_CPU` choose a level; a bad name, or a level this host cannot run, is one
  clear error and exit 1 (code that is only written out, by inspect and compile, may be for
  any level);
- the FMAs of ResNet-18's and the BERT layer's kernels use zmm registers for x86-64-v4 and
  ymm for x86-64-v3, whatever LLVM's tuning for the host's CPU model would prefer;
- `nnc run` prints the tuned-kernel line only when tuning is in play (--cache).

Usage: isa_test.py NNC SHARED_DIR. The model checks are skipped without the shared models.
"""
import os
import re
import subprocess
import sys
import tempfile


def nnc(args, env=None):
    return subprocess.run([NNC] + args, capture_output=True, text=True, env=env, timeout=600)


def fma_registers(asm):
    """Counts of packed-single FMAs by register width."""
    counts = {"zmm": 0, "ymm": 0, "xmm": 0}
    for line in asm.splitlines():
        m = re.match(r"\s*vfn?m(add|sub)\w*ps\s+.*%([xyz]mm)\d+", line)
        if m:
            counts[m.group(2)] += 1
    return counts


def main():
    failures = []

    def check(ok, msg):
        if not ok:
            failures.append(msg)

    devices = nnc(["devices"])
    check(devices.returncode == 0 and re.search(r"code for x86-64(-v[34])? native", devices.stdout),
          f"devices does not name the level: {devices.stdout!r}")
    host_v4 = "code for x86-64-v4" in devices.stdout

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NNC_CACHE_DIR=os.path.join(tmp, "objects"))
        env.pop("NNC_TUNING_CACHE", None)
        env.pop("NNC_CPU", None)
        model = os.path.join(tmp, "m.nir")
        with open(model, "w") as f:
            f.write("graph @m(%x: f32[4,64]) -> (f32[4,64]) {\n"
                    "  %w = constant {value = dense<f32[]>[0.5]} : f32[]\n"
                    "  %y = mul(%x, %w) : f32[4,64]\n"
                    "  return %y\n}\n")
        # An .npy input of 4 x 64 f32 (0.25 each).
        x = os.path.join(tmp, "x.npy")
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        with open(x, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
            f.write(bytes.fromhex("0000803e") * 256)
        model_in = ["--input", "x=" + x]

        r = nnc(["run", model, "--cpu", "bogus"] + model_in, env)
        check(r.returncode == 1 and "unknown CPU target 'bogus'" in r.stderr
              and "x86-64-v3" in r.stderr and "Traceback" not in r.stderr,
              f"--cpu bogus: {r.returncode} {r.stderr!r}")
        r = nnc(["run", model] + model_in, dict(env, NNC_CPU="pentium"))
        check(r.returncode == 1 and "NNC_CPU" in r.stderr and "pentium" in r.stderr,
              f"NNC_CPU=pentium: {r.returncode} {r.stderr!r}")
        r = nnc(["run", model, "--cpu", "x86-64-v3"] + model_in, env)
        check(r.returncode == 0 and "0.125" in r.stdout,
              f"--cpu x86-64-v3: {r.returncode} {r.stdout!r} {r.stderr!r}")
        r = nnc(["run", model, "--cpu", "x86-64-v4"] + model_in, env)
        if host_v4:
            check(r.returncode == 0, f"--cpu x86-64-v4 on an AVX-512 host: {r.stderr!r}")
        else:
            check(r.returncode == 1 and "lacks avx512f" in r.stderr,
                  f"--cpu x86-64-v4 without AVX-512: {r.returncode} {r.stderr!r}")

        # The tuned-kernel line: not on a plain run; with --cache it says what was found.
        mlp_dir = os.path.join(SHARED, "models", "mlp_b1")
        if os.path.exists(mlp_dir):
            mlp = [os.path.join(mlp_dir, "model.onnx"), "--inputs-dir",
                   os.path.join(mlp_dir, "test_data_set_0")]
            r = nnc(["run"] + mlp, env)
            check(r.returncode == 0 and "tuned kernels" not in r.stderr,
                  f"a plain run mentions tuning: {r.stderr!r}")
            r = nnc(["run"] + mlp + ["--cache", os.path.join(tmp, "t.db")], env)
            check(r.returncode == 0 and "tuned kernels: 0/" in r.stderr,
                  f"run --cache does not report tuned kernels: {r.stderr!r}")

        for name in ("resnet18_b1", "bert_layer_b1"):
            path = os.path.join(SHARED, "models", name, "model.onnx")
            if not os.path.exists(path):
                print(f"SKIP {name}: no shared model at {path}")
                continue
            for level, wide, narrow in (("x86-64-v4", "zmm", "ymm"), ("x86-64-v3", "ymm", "zmm")):
                r = nnc(["inspect", path, "--kernels", "--asm", "--cpu", level], env)
                if r.returncode != 0:
                    failures.append(f"{name} --cpu {level}: {r.stderr.strip()}")
                    continue
                c = fma_registers(r.stdout)
                print(f"{name} {level}: FMAs by register {c}")
                check(c[wide] > 0 and c[narrow] == 0 and c["xmm"] == 0,
                      f"{name} --cpu {level}: FMAs {c}, expected {wide} only")
                if level == "x86-64-v3":
                    check("zmm" not in r.stdout, f"{name} --cpu {level} uses zmm registers")

    for f in failures:
        print("FAIL:", f)
    print("isa test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    NNC, SHARED = sys.argv[1], sys.argv[2]
    sys.exit(main())
