#!/usr/bin/env python3
"""How the interpolation points of Winograd's F(4x4, 3x3) move a conv's float32 rounding: the
emulation behind ir/Winograd.cpp's choice (bench/results/domain-models.md, session 47).

For a set of 5 finite points (plus infinity) it builds A^T (the points' Vandermonde matrix), G
(the 1 / prod(p_j - p_l) factors) and B^T (solved so that A^T ((G g) . (B^T d)) is the exact
correlation), then runs a conv of C channels over relu'd (or --input normal / shifted) inputs
the way nnc does: U = G g G^T in float64 rounded once to float32, V = B^T d B in float32, the
batched GEMM in float32, Y = A^T M A in float32. It prints each point set's error against the
float64 direct conv (rms over rms, and max over the range), beside float32's direct conv.

    /usr/bin/python3 bench/winograd_points.py [--channels 256] [--input relu|normal|shifted]
        [--search]   # every 5 of 0, +-1/4, +-1/3, +-1/2, +-2/3, +-1, +-3/2, +-2, +-3, +-4

A benchmark-style report: it asserts nothing.
"""
import argparse
import itertools

import numpy as np

K = 64  # output channels


def matrices(points, m=4, r=3):
    a = m + r - 1
    at, g = np.zeros((m, a)), np.zeros((a, r))
    for j, p in enumerate(points):
        at[:, j] = [p ** i for i in range(m)]
        f = np.prod([p - q for q in points if q != p])
        g[j, :] = [p ** k / f for k in range(r)]
    at[m - 1, a - 1] = 1
    g[a - 1, r - 1] = 1
    # B^T from sum_e AT[i, e] G[e, k] BT[e, t] = [t == i + k].
    rows, rhs = [], []
    for i in range(m):
        for k in range(r):
            for t in range(a):
                row = np.zeros((a, a))
                row[:, t] = at[i, :] * g[:, k]
                rows.append(row.ravel())
                rhs.append(1.0 if t == i + k else 0.0)
    sol = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    if np.abs(np.array(rows) @ sol - np.array(rhs)).max() > 1e-9:
        raise ValueError("no exact algorithm for these points")
    return sol.reshape(a, a), g, at


def winograd(bt, g, at, x, w):
    f = np.float32
    m, a = at.shape[0], at.shape[1]
    c = x.shape[0]
    u = np.einsum("ij,kcjl,ml->kcim", g, w.astype(np.float64), g).astype(f)
    h = x.shape[1] - 2
    nt = h // m
    tiles = [(ty, tx) for ty in range(nt) for tx in range(nt)]
    d = np.stack([x[:, ty * m:ty * m + a, tx * m:tx * m + a] for ty, tx in tiles]).astype(f)
    v = np.matmul(np.matmul(bt.astype(f), d), bt.T.astype(f))
    mm = np.matmul(v.reshape(len(tiles), c, a * a).transpose(2, 0, 1),
                   u.reshape(K, c, a * a).transpose(2, 1, 0))
    mm = mm.transpose(1, 2, 0).reshape(-1, K, a, a)
    yt = np.matmul(np.matmul(at.astype(f), mm), at.T.astype(f))
    y = np.zeros((K, h, h), f)
    for i, (ty, tx) in enumerate(tiles):
        y[:, ty * m:ty * m + m, tx * m:tx * m + m] = yt[i]
    return y


def direct(x, w, dt):
    c, h = x.shape[0], x.shape[1] - 2
    cols = np.stack([x[:, ky:ky + h, kx:kx + h] for ky in range(3) for kx in range(3)], 1)
    return (w.reshape(K, c * 9).astype(dt) @ cols.reshape(c * 9, h * h).astype(dt)).reshape(K, h, h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--size", type=int, default=32, help="output height and width (x4)")
    ap.add_argument("--input", choices=["relu", "normal", "shifted"], default="relu")
    ap.add_argument("--search", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    c, h = args.channels, args.size
    x = rng.standard_normal((c, h + 2, h + 2))
    if args.input == "relu":
        x = np.maximum(x, 0)
    elif args.input == "shifted":
        x = x + 1.0
    x = x.astype(np.float32)
    w = (rng.standard_normal((K, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    ref = direct(x.astype(np.float64), w.astype(np.float64), np.float64)

    def error(y):
        e = y.astype(np.float64) - ref
        return np.sqrt((e ** 2).mean() / (ref ** 2).mean()), np.abs(e).max() / np.ptp(ref)

    print("%-34s rms %.2e  max %.2e" % (("direct f32",) + error(direct(x, w, np.float32))))
    if args.search:
        cands = [0, 1, -1, 2, -2, .5, -.5, 3, -3, 1 / 3, -1 / 3, 1.5, -1.5, 2 / 3, -2 / 3, 4, -4,
                 .25, -.25]
        sets = list(itertools.combinations(cands, 5))
    else:
        sets = [(0, 1, -1, 2, -2), (0, 1, -1, .5, -2), (0, 1.5, -1.5, 2 / 3, -2 / 3)]
    results = []
    for p in sets:
        try:
            bt, g, at = matrices(list(p))
        except (ValueError, ZeroDivisionError):
            continue
        results.append(error(winograd(bt, g, at, x, w)) + (p,))
    for rms, mx, p in sorted(results)[:20]:
        print("F(4x4) %-27s rms %.2e  max %.2e" % (
            ", ".join("%.3g" % v for v in p), rms, mx))


if __name__ == "__main__":
    main()
