"""The machine line each result carries: what ran the figures, since they hold only there.

CPU model and ISA flags from /proc/cpuinfo, the cores this process may use, LLVM's name for
the host CPU (`llc-15 --version`), the code nnc generates here (`nnc devices`: ISA level and
vector width, chosen from the CPU's features), the load average and the git commit."""

import datetime
import os
import platform

from . import proc
from .nnc import ROOT, command

ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpuinfo():
    """(model name, set of flags) of the first CPU in /proc/cpuinfo."""
    name, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and name is None:
                    name = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine(), flags


def cores():
    """The cores this process may run on (its affinity, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def llc_host_cpu():
    """LLVM 15's name for the host CPU, or "?"."""
    for tool in ("llc-15", "/usr/lib/llvm-15/bin/llc"):
        rc, out, _ = proc.run([tool, "--version"])
        if rc == 0:
            for line in out.splitlines():
                if "Host CPU" in line:
                    return line.split(":", 1)[1].strip()
    return "?"


def nnc_cpu(nnc, env=None):
    """nnc's `cpu:` line of `nnc devices` (ISA level, vector width, caches), or "?"."""
    if not nnc:
        return "?"
    rc, out, _ = proc.run(command(nnc) + ["devices"], env, timeout=60)
    for line in out.splitlines():
        if line.startswith("cpu:"):
            return line[len("cpu:"):].strip()
    return "?"


def load():
    """The 1/5/15-minute load average as text."""
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "?"


def git_commit(root=ROOT):
    """The short commit of the checkout, marked when it has uncommitted changes."""
    rc, rev, _ = proc.run(["git", "-C", root, "rev-parse", "--short", "HEAD"])
    if rc != 0:
        return "?"
    _, dirty, _ = proc.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"])
    return rev.strip() + (" (+ uncommitted changes)" if dirty.strip() else "")


def describe(nnc=None, env=None):
    """The machine as a dict (what a study's .json keeps)."""
    name, flags = cpuinfo()
    return {"cpu": name, "cores": cores(), "isa": [f for f in ISA_FLAGS if f in flags],
            "llc_host_cpu": llc_host_cpu(), "nnc_cpu": nnc_cpu(nnc, env), "load": load(),
            "commit": git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def line(d):
    """describe()'s dict as the one-line Markdown machine header."""
    return ("Machine: %s, %s cores usable, ISA %s; `llc-15 --version` host CPU `%s`; "
            "`nnc devices`: %s." % (d["cpu"], d["cores"], " ".join(d["isa"]) or "?",
                                    d["llc_host_cpu"], d["nnc_cpu"]))
