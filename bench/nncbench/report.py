"""Result files: Markdown tables, and one current file per study in bench/results/.

A study's file is bench/results/STUDY.md (with STUDY.png for a plot, and STUDY.json beside it:
the raw figures of the last run, which git ignores). A new run replaces it; the earlier ones
stay in git: `git log -p -- bench/results/STUDY.md`."""

import json
import os
import shlex
import sys

from . import machine
from .nnc import BENCH, ROOT

RESULTS = os.path.join(BENCH, "results")


def result_path(study, out=None):
    """Where a study writes: `out` when given, else bench/results/STUDY.md."""
    path = out or os.path.join(RESULTS, study + ".md")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


def invocation(python="python3"):
    """How this script was run, as a shell line from the repository root."""
    return command_line([python, os.path.abspath(sys.argv[0])] + sys.argv[1:])


def header(title, mach, load_after=None, notes=(), python="python3"):
    """A result's first lines: its title, the machine, the commit and the date, the command
    that wrote it, and the load average around the run (figures compare only within a run)."""
    lines = ["# " + title, "", machine.line(mach),
             "nnc at commit %s; %s." % (mach["commit"], mach["date"]),
             "Written by `%s`." % invocation(python)]
    if load_after is None:
        lines.append("Load average (1/5/15 min) at the start: %s." % mach["load"])
    else:
        lines.append("Load average (1/5/15 min) before: %s; after: %s." % (mach["load"],
                                                                          load_after))
    return lines + list(notes) + [""]


def table(head, rows):
    """A Markdown table: a header row and rows of cells (each cell str()-ed)."""
    out = ["| " + " | ".join(str(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def command_line(cmd):
    """A command as a shell line, paths inside the repository made relative to it."""
    return " ".join(shlex.quote(os.path.relpath(a, ROOT) if isinstance(a, str) and
                                a.startswith(ROOT + os.sep) else str(a)) for a in cmd)


def commands_block(commands):
    """The commands a study ran (argument lists, or lines already written), fenced."""
    return ["```"] + [c if isinstance(c, str) else command_line(c) for c in commands] + \
        ["```", ""]


def shown(path):
    """A path as a message shows it: relative to the working folder when inside it."""
    rel = os.path.relpath(path, os.getcwd())
    return path if rel.startswith("..") else rel


def write(path, lines, data=None):
    """Writes the Markdown `lines` to path and, with `data`, its .json beside it."""
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")
    if data is not None:
        with open(os.path.splitext(path)[0] + ".json", "w") as f:
            json.dump(data, f, indent=1)
    print("wrote %s" % shown(path))


def bar_plot(path, names, panels, ylabel, title, quiet=False):
    """Grouped bars, one panel per (panel title, {series label: one value per name}) with a
    line at 1 (parity), written to path. False without matplotlib (said so unless quiet)."""
    try:
        import matplotlib
    except ImportError:
        if not quiet:
            print("plot skipped: matplotlib is not installed (scripts/setup-bench.sh)")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(max(6, 0.7 * len(names)) * len(panels), 4.5))
    for ax, (panel, series) in zip(axes[0], panels):
        width = 0.8 / max(1, len(series))
        for j, (label, ys) in enumerate(series.items()):
            ax.bar([i + j * width for i in range(len(names))], ys, width, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(names))])
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        if panel:
            ax.set_title(panel)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print("wrote %s" % shown(path))
    return True


class Notebook:
    """A study's report lines, printed as they come; save() writes them under the header (the
    machine, the commit, the command, the load average around the run) when given a path,
    in a fenced block when they are plain text (fenced=True) rather than Markdown."""

    def __init__(self, title, nnc=None, fenced=False):
        self.title = title
        self.fenced = fenced
        self.mach = machine.describe(nnc)
        self.lines = []

    def say(self, *lines):
        for line in lines:
            print(line, flush=True)
            self.lines.append(line)

    def save(self, out, data=None):
        if not out:
            return
        body = ["```"] + self.lines + ["```"] if self.fenced else self.lines
        write(result_path(None, out), header(self.title, self.mach, machine.load()) + body,
              None if data is None else dict(data, machine=self.mach))
