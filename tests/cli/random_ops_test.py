#!/usr/bin/env python3
"""The random generators (RandomUniform, RandomNormal, their -Like forms, Bernoulli,
Multinomial) through the nnc CLI.

Every target draws the same numbers (the counter-based generator of ir/Training.h is built of
exact integer ops): the output files of interp, cpu and opencl are byte-identical, and a
second run gives the same bytes. The numbers have the asked-for distribution (mean, spread,
range, rates, class frequencies, within five standard errors of large samples); a different
seed draws different numbers; two unseeded nodes draw different numbers; a Like form takes a
run-time shape; p = 0 and p = 1 and a class of probability 0 (log-probability -inf) are
exact. Bad attributes are one error naming the node. OpenCL parts run where a device is found
(PoCL in CI) and say so when skipped.

Usage: random_ops_test.py NNC_BINARY
"""
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import attr_float, attr_int, attr_ints, model, node, value_info  # noqa: E402
from train_data import read_npy  # noqa: E402

from clitest import BOOL, DOUBLE, FLOAT, INT32, INT64, check, pb, run, write  # noqa: E402
import clitest  # noqa: E402

NNC = sys.argv[1]


def mean_std(v):
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / len(v))


class Case:
    """One model run on every target: outputs byte-identical across targets and reruns."""

    def __init__(self, tmp, targets, name, onnx, inputs=()):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "m.onnx")
        write(self.path, onnx)
        self.args = []
        for iname, dims, values, elem in inputs:
            self.args += pb(self.dir, iname, dims, values, elem)
        self.name = name
        self.targets = targets

    def outputs(self, count):
        """[(values, shape)] of each output, checked equal on every target and a rerun."""
        ref = None
        for t in self.targets + [self.targets[0]]:
            out = os.path.join(self.dir, f"out_{t}")
            r = run([NNC, "run", self.path, "--target", t, "-q", "--output-dir", out,
                     "--output-format", "npy"] + self.args)
            check(r.returncode == 0, f"{self.name} --target {t}: exit {r.returncode}: {r.stderr}")
            if r.returncode != 0:
                return None
            files = [os.path.join(out, f"output_{i}.npy") for i in range(count)]
            raw = [open(f, "rb").read() for f in files]
            if ref is None:
                ref = raw
                vals = [read_npy(f) for f in files]
            else:
                check(raw == ref, f"{self.name}: --target {t} drew other numbers than "
                      f"--target {self.targets[0]}")
        return vals


def within(name, got, want, tol):
    check(abs(got - want) <= tol, f"{name}: {got:.5f}, expected {want:.5f} +- {tol:.5f}")


def main():
    with tempfile.TemporaryDirectory(prefix="nnc-random-") as tmp:
        targets = clitest.targets(NNC, tmp)

        # RandomUniform: range, mean, spread; another seed draws other numbers.
        n = 100000
        def uniform(seed, dtype=FLOAT):
            return model([node("RandomUniform", [], ["y"], "ru",
                               [attr_ints("shape", [200, 500]), attr_float("low", -2.0),
                                attr_float("high", 3.0), attr_float("seed", seed),
                                attr_int("dtype", dtype)])],
                         [], [value_info("y", [200, 500], dtype)])
        got = Case(tmp, targets, "uniform", uniform(3.0)).outputs(1)
        if got:
            v, shape = got[0]
            check(shape == [200, 500], f"RandomUniform shape {shape}")
            check(min(v) >= -2.0 and max(v) < 3.0, f"RandomUniform range [{min(v)}, {max(v)}]")
            m, s = mean_std(v)
            se = 5 / math.sqrt(12 * n)
            within("RandomUniform mean", m, 0.5, 5 * se)
            within("RandomUniform std", s, 5 / math.sqrt(12), 0.02)
            other = Case(tmp, targets[:1], "uniform_seed4", uniform(4.0)).outputs(1)
            if other:
                same = sum(a == b for a, b in zip(v, other[0][0]))
                check(same < n // 1000, f"seeds 3 and 4 drew {same} equal numbers of {n}")
        got = Case(tmp, targets, "uniform_f64", uniform(3.0, DOUBLE)).outputs(1)
        if got:
            v, _ = got[0]
            # 53 random bits: far more distinct values than an f32 draw could give.
            check(len(set(v)) > n - 10, f"RandomUniform double: {len(set(v))} distinct of {n}")
        print(f"ok: RandomUniform ({', '.join(targets)})")

        # RandomNormal.
        m_ = model([node("RandomNormal", [], ["y"], "rn",
                         [attr_ints("shape", [n]), attr_float("mean", 1.0),
                          attr_float("scale", 2.0), attr_float("seed", 1.0)])],
                   [], [value_info("y", [n])])
        got = Case(tmp, targets, "normal", m_).outputs(1)
        if got:
            v, _ = got[0]
            m, s = mean_std(v)
            within("RandomNormal mean", m, 1.0, 5 * 2 / math.sqrt(n))
            within("RandomNormal std", s, 2.0, 5 * 2 / math.sqrt(2 * n))
            inside = sum(abs(x - 1.0) < 2.0 for x in v) / n
            within("RandomNormal within one sigma", inside, 0.6827, 5 * math.sqrt(0.217 / n))
            check(all(math.isfinite(x) for x in v), "RandomNormal drew a non-finite number")
        print(f"ok: RandomNormal ({', '.join(targets)})")

        # The Like forms on a run-time shape; two unseeded nodes draw different numbers.
        rows = 25000
        m_ = model([node("RandomNormalLike", ["x"], ["a"], "rnl", [attr_int("dtype", DOUBLE)]),
                    node("RandomUniformLike", ["x"], ["b"], "rul1"),
                    node("RandomUniformLike", ["x"], ["c"], "rul2")],
                   [value_info("x", ["N", 4])],
                   [value_info("a", ["N", 4], DOUBLE), value_info("b", ["N", 4]),
                    value_info("c", ["N", 4])])
        got = Case(tmp, targets, "like", m_, [("x", [rows, 4], [0.0] * (rows * 4), FLOAT)]
                   ).outputs(3)
        if got:
            (a, sa), (b, sb), (c, _) = got
            check(sa == [rows, 4] and sb == [rows, 4], f"Like shapes {sa} {sb}")
            m, s = mean_std(a)
            within("RandomNormalLike double mean", m, 0.0, 5 / math.sqrt(4 * rows))
            within("RandomNormalLike double std", s, 1.0, 5 / math.sqrt(8 * rows))
            same = sum(x == y for x, y in zip(b, c))
            check(same < rows * 4 // 1000, f"two unseeded RandomUniformLike: {same} equal")
            check(min(b) >= 0 and max(b) < 1, f"RandomUniformLike range [{min(b)}, {max(b)}]")
        print(f"ok: RandomNormalLike, RandomUniformLike on a run-time shape ({', '.join(targets)})")

        # Bernoulli: rows of p = 0, 1, 0.25, 0.7; a float and a bool result.
        k = 10000
        probs = [0.0] * k + [1.0] * k + [0.25] * k + [0.7] * k
        m_ = model([node("Bernoulli", ["p"], ["y"], "bern", [attr_float("seed", 7.0)]),
                    node("Bernoulli", ["p"], ["z"], "bern_bool",
                         [attr_float("seed", 7.0), attr_int("dtype", BOOL)])],
                   [value_info("p", [4, k])], [value_info("y", [4, k]), value_info("z", [4, k], BOOL)],
                   opset=15)
        got = Case(tmp, targets, "bernoulli", m_, [("p", [4, k], probs, FLOAT)]).outputs(2)
        if got:
            (y, _), (z, _) = got
            check(set(y) <= {0.0, 1.0}, f"Bernoulli drew {sorted(set(y))[:5]}")
            check(sum(y[:k]) == 0, "Bernoulli p = 0 drew a 1")
            check(sum(y[k:2 * k]) == k, "Bernoulli p = 1 drew a 0")
            for row, p_ in ((2, 0.25), (3, 0.7)):
                within(f"Bernoulli rate at p = {p_}", sum(y[row * k:(row + 1) * k]) / k, p_,
                       5 * math.sqrt(p_ * (1 - p_) / k))
            check([bool(t) for t in y] == list(z), "Bernoulli: the bool result differs "
                  "from the float one with the same seed")
        print(f"ok: Bernoulli ({', '.join(targets)})")

        # Multinomial: class frequencies; classes of probability 0 never drawn.
        s_ = 20000
        lp = [math.log(q) for q in (0.1, 0.2, 0.3, 0.4)] + [-math.inf, 0.0, -math.inf, 0.0]
        m_ = model([node("Multinomial", ["x"], ["y"], "multi",
                         [attr_int("sample_size", s_), attr_int("dtype", INT64),
                          attr_float("seed", 2.0)])],
                   [value_info("x", [2, 4])], [value_info("y", [2, s_], INT64)])
        got = Case(tmp, targets, "multinomial", m_, [("x", [2, 4], lp, FLOAT)]).outputs(1)
        if got:
            y, shape = got[0]
            check(shape == [2, s_], f"Multinomial shape {shape}")
            for cls, q in enumerate((0.1, 0.2, 0.3, 0.4)):
                within(f"Multinomial row 0 class {cls}", y[:s_].count(cls) / s_, q,
                       5 * math.sqrt(q * (1 - q) / s_))
            check(set(y[s_:]) <= {1, 3}, f"Multinomial drew classes {sorted(set(y[s_:]))} "
                  "where only 1 and 3 have probability")
            within("Multinomial row 1 class 1", y[s_:].count(1) / s_, 0.5,
                   5 * math.sqrt(0.25 / s_))
        print(f"ok: Multinomial ({', '.join(targets)})")

        # Bad attributes: one error naming the node, exit 1.
        bad = [
            ("integer dtype", model([node("RandomUniform", [], ["y"], "ru_int",
                                          [attr_ints("shape", [2]), attr_int("dtype", INT32)])],
                                    [], [value_info("y", [2], INT32)]), "ru_int"),
            ("no shape", model([node("RandomNormal", [], ["y"], "rn_noshape")], [],
                               [value_info("y", [2])]), "rn_noshape"),
            ("float Multinomial", model([node("Multinomial", ["x"], ["y"], "multi_f",
                                              [attr_int("dtype", FLOAT)])],
                                        [value_info("x", [1, 3])], [value_info("y", [1, 1])]),
             "multi_f"),
            ("low above high", model([node("RandomUniform", [], ["y"], "ru_lh",
                                           [attr_ints("shape", [2]), attr_float("low", 2.0),
                                            attr_float("high", 1.0)])],
                                     [], [value_info("y", [2])]), "ru_lh"),
            ("absurd shape", model([node("RandomUniform", [], ["y"], "ru_huge",
                                         [attr_ints("shape", [1 << 20, 1 << 20, 1 << 10])])],
                                   [], [value_info("y", [1 << 20, 1 << 20, 1 << 10])]),
             "ru_huge"),
            ("absurd sample_size", model([node("Multinomial", ["x"], ["y"], "multi_huge",
                                               [attr_int("sample_size", 1 << 40)])],
                                         [value_info("x", [2, 3])],
                                         [value_info("y", [2, 1 << 40], INT32)]), "multi_huge"),
        ]
        for what, onnx, name in bad:
            path = os.path.join(tmp, f"bad_{name}.onnx")
            write(path, onnx)
            r = run([NNC, "check", path])
            check(r.returncode == 1 and name in r.stderr,
                  f"{what}: nnc check exit {r.returncode}, stderr {r.stderr!r}")
        print("ok: bad attributes refused with the node named")
    return clitest.finish()


if __name__ == "__main__":
    sys.exit(main())
