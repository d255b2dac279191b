"""Running the programs a benchmark times: exit status and output, JSON lines, wall time, RSS."""

import json
import os
import re
import subprocess
import sys
import time


def run(cmd, env=None, timeout=None):
    """Runs cmd with `env` added to this process's environment: (exit status, stdout, stderr).
    A timeout (status 124) or a program that cannot start (127) is a failure, not an exception,
    so that a study reports it beside the figures that did come."""
    full = dict(os.environ)
    full.update(env or {})
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %s s" % timeout
    except OSError as e:
        return 127, "", "%s: %s" % (cmd[0], e)
    return p.returncode, p.stdout, p.stderr


def json_lines(text):
    """The lines of `text` that are JSON objects, parsed, in order."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def last_line(text):
    """The last non-empty line of `text` (where a failing tool puts its error), or ""."""
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


def run_json(cmd, env=None, timeout=None):
    """Runs cmd: (its last JSON line as a dict, None), or (None, a one-line reason)."""
    rc, out, err = run(cmd, env, timeout)
    if rc != 0:
        return None, "exit %d: %s" % (rc, last_line(err) or last_line(out))
    found = json_lines(out)
    if not found:
        return None, "no JSON in output: %r" % out[-200:]
    return found[-1], None


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time -v: (stdout, wall seconds, peak RSS in MB). A failure
    ends the study with the command and its output."""
    t0 = time.monotonic()
    rc, out, err = run(["/usr/bin/time", "-v"] + cmd, env)
    wall = time.monotonic() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    if rc != 0 or not rss:
        sys.exit("%s failed (exit %d):\n%s%s" % (" ".join(cmd), rc, out, err))
    return out, wall, int(rss.group(1)) / 1024.0


def require_torch():
    """The torch module, or exit saying how to get it (the scripts that export PyTorch models
    run with Debian's python3-torch)."""
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is not importable by %s (scripts/setup-bench.sh installs "
                 "python3-torch; run this with /usr/bin/python3)" % sys.executable)
    return torch
