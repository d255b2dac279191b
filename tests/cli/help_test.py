#!/usr/bin/env python3
"""`nnc help`, `nnc --help` and `nnc` alone list every command with its one-line description;
`nnc help COMMAND` shows that command's options, as `nnc COMMAND --help` does; an unknown
command is one error line and exit 1.

Usage: help_test.py NNC
"""
import re
import subprocess
import sys

NNC = sys.argv[1]
COMMANDS = ["run", "bench", "tune", "cache", "check", "devices", "inspect", "compile", "train",
            "help"]


def run(args):
    return subprocess.run([NNC] + args, capture_output=True, text=True, timeout=60)


def listed(text):
    """Command name -> description from the help's subcommand section."""
    m = re.search(r"^subcommands:\n((?:[ \t]+\S.*\n?)+)", text, re.M | re.I)
    if not m:
        return {}
    out = {}
    for line in m.group(1).splitlines():
        parts = line.strip().split(None, 1)
        if parts:
            out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    for args, rc in (["help"], 0), (["--help"], 0), ([], 1):
        p = run(args)
        what = "nnc " + " ".join(args) if args else "nnc"
        check(p.returncode == rc, f"{what}: exit {p.returncode}, expected {rc}")
        commands = listed(p.stdout)
        for c in COMMANDS:
            check(c in commands, f"{what}: command '{c}' not listed:\n{p.stdout}")
            check(bool(commands.get(c)), f"{what}: command '{c}' has no description")
        check(set(commands) == set(COMMANDS),
              f"{what}: lists {sorted(commands)}, expected {sorted(COMMANDS)}")
        # The top-level help, not the help command's own (its only option is `command`).
        check("--version" in p.stdout, f"{what}: no --version in the top-level help")

    for c in COMMANDS[:-1]:
        by_help, by_flag = run(["help", c]), run([c, "--help"])
        check(by_help.returncode == 0, f"nnc help {c}: exit {by_help.returncode}")
        check(by_flag.returncode == 0, f"nnc {c} --help: exit {by_flag.returncode}")
        check(by_help.stdout == by_flag.stdout,
              f"nnc help {c} differs from nnc {c} --help:\n{by_help.stdout}\n---\n{by_flag.stdout}")
        check(re.search(rf"^Usage: nnc {c}\b", by_help.stdout, re.M) is not None,
              f"nnc help {c}: no usage line 'Usage: nnc {c}': {by_help.stdout[:200]}")
    inspect = run(["help", "inspect"]).stdout
    for flag in ("--full-constants", "--format", "--plan", "--kernels", "--print-ir-after-all"):
        check(flag in inspect, f"nnc help inspect: {flag} not shown")

    bad = run(["help", "no-such-command"])
    check(bad.returncode == 1, f"nnc help no-such-command: exit {bad.returncode}")
    err = bad.stderr.strip().splitlines()
    check(len(err) == 1 and "no-such-command" in err[0] and "inspect" in err[0],
          f"nnc help no-such-command: stderr {bad.stderr!r}")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"ok: {len(COMMANDS)} commands listed by nnc, nnc help and nnc --help, and each "
              "command's help")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
