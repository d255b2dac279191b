"""Statistics of noisy timings: medians, alternated rounds, ratios with their spread.

A shared host's speed moves between minutes, so no figure is one run: each case runs in
rounds, the order changing every round (whichever runs first in a round is not always the same
case), and a figure is the median over rounds of each run's median. Between engines, the
measurement is the ratio taken in the same run."""

import math
import statistics
import time

median = statistics.median


def order(cases, r, rotate=False):
    """The cases in round r's order: reversed every other round, or rotated by r with
    rotate=True (for more than two cases, so that each takes every slot in turn)."""
    cases = list(cases)
    if rotate:
        k = r % len(cases) if cases else 0
        return cases[k:] + cases[:k]
    return cases[::-1] if r % 2 else cases


def spread(values):
    """{"median", "q1", "q3", "min", "max"} of a sample (quartiles inclusive; one value is
    its own quartiles)."""
    v = sorted(values)
    if len(v) > 1:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1]}


def ratios(pairs):
    """The spread of a / b over (a, b) pairs measured in the same round."""
    return spread([a / b for a, b in pairs])


def percentile(sorted_values, q):
    """The nearest-rank q-quantile of an ascending sample (as `nnc bench` takes its p90)."""
    n = len(sorted_values)
    return sorted_values[min(n - 1, max(0, math.ceil(q * n) - 1))]


def time_calls(fn, iterations, warmup):
    """Calls fn `warmup` times untimed, then `iterations` times: each call's time in ms."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def fmt_ms(x):
    """A latency in ms with four significant-ish digits; "—" for a missing one."""
    if x is None:
        return "—"
    return "%.4f" % x if x < 1 else "%.3f" % x if x < 10 else "%.2f" % x
