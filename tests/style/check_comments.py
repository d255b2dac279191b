#!/usr/bin/env python3
"""Checks that the comments of the compiler's code say why, not what a run measured.

Comments in ir/, passes/, codegen/, runtime/ and include/nnc/ (their public headers) must
hold no timing figures and no machine names: a measurement is true of one build on one
machine on one day, and it belongs in the commit that made the change and in bench/results,
where it is dated and reproducible. The comment keeps the reason the code is the way it is.

The rule, applied to the text of each comment (// and /* */, string literals skipped), with
consecutive // lines joined into one block so that a figure split over two lines is seen:

  duration    a number followed by ns, us, µs or ms ("12 us", "0.25 ms", "28 -> 44 ms").
              Seconds are not flagged: the code's timeouts and limits are given in seconds
              ("retried for up to 30 s"), measured kernel times are not.
  throughput  GFLOP/s, GFLOPS, TFLOP/s, GB/s, GiB/s, MB/s, MiB/s, flop/cycle.
  change      a decimal before -> after pair ("1.6 -> 0.25", "101.2 -> 95.6"); integer pairs
              are not flagged ("64 -> 128 channels" is a shape, not a measurement), nor are
              signed percentages outside a speed sentence.
  ratio       a multiplier ("2.4x", not "3x3") or a percentage ("5%", "+20%") in the same
              sentence as a word about speed or time (faster, slower, longer, shorter, speed,
              speedup, quicker, took, takes, measured, "the time", "'s time", "as fast",
              "as long"). "0.4% error", "noise margin 2%", "by up to 512x" fewer page faults
              and "a 16x smaller intermediate" pass.
  machine     a CPU product line or microarchitecture: EPYC, Xeon, Zen, Ryzen, Threadripper,
              Opteron, Core i3/i5/i7/i9, Skylake, Cascade/Cooper/Ice/Tiger/Alder/Raptor/Kaby/
              Coffee Lake, Sandy/Ivy Bridge, Haswell, Broadwell, Sapphire/Emerald/Granite
              Rapids, Genoa, Milan, Graviton, Neoverse, Apple M1-M4; and GPU models: A100,
              H100, V100, H200, B200, GeForce, RTX N, Quadro, Radeon, Instinct, MI100-MI399.
              Instruction sets (AVX2, AVX-512, VNNI, AMX, NEON) and bare vendor names (an AMD
              wavefront, LLVM's tuning of Intel models) describe what the code targets and are
              not flagged.

A figure that explains a choice goes to bench/results/measurements-behind-defaults.md, beside
the file and rule it is about; the comment says what the measurement showed in words.
The script checks its own rule on the examples in BAD and GOOD before it scans.

Usage: check_comments.py SOURCE_DIR [FILE...]. With FILEs, checks those (paths relative to
SOURCE_DIR or absolute) instead of the folders. Prints each offending line as
path:line: [rule] text and exits 1 when there is one, 0 otherwise.
"""
import os
import re
import sys

FOLDERS = ["ir", "passes", "codegen", "runtime", "include/nnc"]
SUFFIXES = (".h", ".hpp", ".cpp", ".c", ".def", ".inc")

NUM = r"\d+(?:\.\d+)?"
SPEED_WORDS = re.compile(
    r"(?i)\b(faster|slower|longer|shorter|speed|speeds|speedup|speed-up|quicker|took|takes"
    r"|measured|the time|'s time|as fast|as long)\b")
RULES = [
    ("duration", re.compile(r"(?<![\w.])" + NUM + r"(?:\s*-\s*" + NUM + r")?\s*(?:ns|us|µs|ms)\b")),
    ("throughput", re.compile(r"(?i)\b(?:[GT]FLOP/s|[GT]FLOPS|[GMK]i?B/s|flops?/cycle)")),
    ("change", re.compile(r"(?<![\w.])(?:\d+\.\d+\s*->\s*" + NUM + r"|\d+\s*->\s*\d+\.\d+)\b")),
    ("machine", re.compile(
        r"\b(?:EPYC|Xeon|Zen(?:\s?\d)?|Ryzen|Threadripper|Opteron|Core i[3579]"
        r"|(?:Cascade|Cooper|Ice|Tiger|Alder|Raptor|Kaby|Coffee)\s?Lake|(?:Sandy|Ivy)\s?Bridge"
        r"|Skylake|Haswell|Broadwell|(?:Sapphire|Emerald|Granite)\s?Rapids|Genoa|Milan"
        r"|Graviton|Neoverse|Apple M[1-4]|[AHV]100|[HB]200|GeForce|RTX\s?\d+|Quadro|Radeon"
        r"|Instinct|MI[123]\d\d)\b")),
]
# A multiplier or percentage; a ratio only in a sentence about speed (see SPEED_WORDS).
RATIO = re.compile(r"(?<![\w.])[+-]?" + NUM + r"(?:\s*-\s*" + NUM + r")?(?:x(?![\w])|\s*%)")


def comments(text):
    """Yields (line, text) for every comment line of C/C++ source `text`, skipping string
    and character literals (raw strings included), so that "%016x" is not a comment."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield line, "//", text[i + 2:j]
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split("\n")):
                yield line + k, "/*", part
            line += text.count("\n", i, j)
            i = j + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def blocks(text):
    """Groups comment lines into blocks: consecutive // lines, or one /* */ comment's lines.
    Yields lists of (line, text)."""
    block, last, last_kind = [], None, None
    for line, kind, body in comments(text):
        body = body.lstrip("/!").strip()
        if block and (line != last + 1 or kind != last_kind):
            yield block
            block = []
        block.append((line, body))
        last, last_kind = line, kind
    if block:
        yield block


def findings(text):
    """(line, rule, line text) for each offending comment line of `text`."""
    out = set()
    for block in blocks(text):
        # Joined text, and for each character the source line it came from.
        joined, owner = "", []
        for line, body in block:
            piece = body + " "
            joined += piece
            owner += [line] * len(piece)
        for rule, pattern in RULES:
            for m in pattern.finditer(joined):
                out.add((owner[m.start()], rule))
        # Sentences end at ". " followed by a capital or at the end of the block.
        start = 0
        for end in [m.end() for m in re.finditer(r"[.;]\s+(?=[A-Z(])", joined)] + [len(joined)]:
            sentence = joined[start:end]
            if SPEED_WORDS.search(sentence):
                for m in RATIO.finditer(sentence):
                    out.add((owner[start + m.start()], "ratio"))
            start = end
    return sorted((line, rule, lines_of(text, line)) for line, rule in out)


def lines_of(text, line):
    return text.split("\n")[line - 1].strip()


# The rule on examples, checked before every run so that a regex that stops matching fails
# the test instead of passing everything: each BAD comment must be flagged by the rule named,
# no GOOD one by any.
BAD = [
    ("duration", "// the 2-D form took 1.6 -> 0.25 ms"),
    ("duration", "// one tile's ~2 us, most of what one core draws"),
    ("throughput", "// reaches 180 GFLOP/s on this shape"),
    ("throughput", "// 5 GB/s, a third of this schedule's"),
    ("change", "// ResNet-50 86.3 -> 85.4 with the rule"),
    ("ratio", "// made the matmuls 4x slower"),
    ("ratio", "// took 5% longer in one block"),
    ("ratio", "// measured slower (RegNet's projections:\n// m 1 x r 14 against m 2 x r 6, +20%)"),
    ("ratio", "/* 1.3x the time of one reused slot */"),
    ("machine", "// on a 2-core EPYC (AVX2)"),
    ("machine", "// on an AVX-512 Zen 4"),
    ("machine", "// Sapphire Rapids' AMX tiles"),
    ("machine", "// on an H200"),
]
GOOD = [
    "// AVX2, AVX-512 and VNNI paths; one AMD wavefront is 64 work-items",
    "// LLVM 15 tunes AVX-512 Intel models to prefer 256-bit vectors",
    "// 64 -> 128 channels on 8 x 56 x 56, a 3x3 window, 16x smaller",
    "// retried for up to 30 s while SQLite answers SQLITE_BUSY",
    "// within 0.4% error; noise margin 2%; steps of 2% from the lower bound",
    "// cut the page faults (at compile time) by up to 512x",
    "// buffers of 1 MiB, 48 KiB panels, 4 KiB pages",
    'const char *fmt = "%016x 12 ms";  // a string, not a comment',
]


def self_test():
    failures = []
    for rule, text in BAD:
        got = {r for _, r, _ in findings(text)}
        if rule not in got:
            failures.append(f"not flagged as {rule}: {text!r} (got {sorted(got)})")
    for text in GOOD:
        got = findings(text)
        if got:
            failures.append(f"flagged: {text!r} ({[r for _, r, _ in got]})")
    for f in failures:
        print("SELF-TEST FAIL:", f)
    return not failures


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    if not self_test():
        return 1
    src = argv[1]
    if len(argv) > 2:
        files = [f if os.path.isabs(f) else os.path.join(src, f) for f in argv[2:]]
    else:
        files = []
        for folder in FOLDERS:
            root = os.path.join(src, folder)
            if not os.path.isdir(root):
                print(f"check_comments: no folder {root}")
                return 2
            for d, _, names in os.walk(root):
                files += [os.path.join(d, f) for f in sorted(names) if f.endswith(SUFFIXES)]
    bad = 0
    for path in sorted(files):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, rule, shown in findings(text):
            print(f"{os.path.relpath(path, src)}:{line}: [{rule}] {shown}")
            bad += 1
    if bad:
        print(f"FAIL: {bad} comment line(s) quote timings or name machines; say why instead "
              "(the figures belong in the commit message and bench/results)")
        return 1
    print(f"ok: {len(files)} files, no timings or machine names in comments")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
