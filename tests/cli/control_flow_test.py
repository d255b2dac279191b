#!/usr/bin/env python3
"""ONNX control flow (Scan, Loop, If) through the nnc CLI on interp, cpu and opencl.

Models written here (scripts/onnxw.py), each checked against answers computed in Python:
- Scan with two states, two scanned inputs and two scan outputs, every axis and direction
  attribute other than its default, and a body reading a value of the outer graph;
- Loop with a constant trip count and no condition input, a body reading an outer value and
  its iteration number, a loop-carried value and a scan output; the same with the trip count
  and the condition as graph inputs (the results' shapes then depend on them: staged);
- If with a run-time condition whose branches give one type (both run, then a select) and
  whose branches give different shapes (staged), for both values of the condition;
- a Loop inside a Loop's body and a while loop inside one; while loops inside while loops
  (with the outer one's per-step outputs, and three loops deep) and a Loop of 1000 steps
  inside one, all run as nested loops on cpu and opencl;
- Loop whose body computes its condition (a while loop), with and without a trip count, for
  conditions that stop it at once, after some steps, and at the trip count;
  with and without per-step outputs (their rows known only once the loop ends; with a
  constant trip count one loop writes them, checked in `inspect --after import`), and one
  appending to a sequence (read back by ConcatFromSequence, SequenceLength and SequenceAt);
`nnc inspect --kernels` of a while loop (its body once) and `nnc compile` refusing it; and
the errors: a Loop of an absurd trip count, a body reading a value no scope defines. OpenCL parts run where a device is found.

Usage: control_flow_test.py NNC_BINARY
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
from onnxw import (attr_graph, attr_int, attr_ints, field_bytes, graph, model,  # noqa: E402
                   node, tensor, value_info)

from clitest import BOOL, FLOAT, INT64, check, pb, run, write  # noqa: E402
import clitest  # noqa: E402

NNC = sys.argv[1]


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-5 * (1 + abs(y)) for x, y in zip(a, b))


def scalar_vi(name, elem):
    return value_info(name, [], elem)


# ---- Scan: states s [2] (sum), c [] (count); x [2,3] scanned along axis 1 backwards,
# z [3,2] along axis 0; w [2] from the outer graph. y1 = s' stacked along axis 1 in reverse
# order, y2 = c' stacked along axis 0.
def scan_model():
    body = graph(
        [node("Mul", ["xt", "w"], ["xw"], "mul"),
         node("Add", ["s_in", "xw"], ["s1"], "add1"),
         node("Add", ["s1", "zt"], ["s_out"], "add2"),
         node("Add", ["c_in", "one"], ["c_out"], "inc"),
         node("Identity", ["s_out"], ["y1"], "id1"),
         node("Identity", ["c_out"], ["y2"], "id2")],
        [value_info("s_in", [2]), scalar_vi("c_in", FLOAT), value_info("xt", [2]),
         value_info("zt", [2])],
        [value_info("s_out", [2]), scalar_vi("c_out", FLOAT), value_info("y1", [2]),
         scalar_vi("y2", FLOAT)],
        name="scan_body")
    scan = node("Scan", ["s0", "c0", "x", "z"], ["s", "c", "y1s", "y2s"], "scan",
                [attr_graph("body", body), attr_int("num_scan_inputs", 2),
                 attr_ints("scan_input_axes", [1, 0]), attr_ints("scan_input_directions", [1, 0]),
                 attr_ints("scan_output_axes", [1, 0]),
                 attr_ints("scan_output_directions", [1, 0])])
    return model([scan],
                 [value_info("s0", [2]), scalar_vi("c0", FLOAT), value_info("x", [2, 3]),
                  value_info("z", [3, 2]), value_info("w", [2])],
                 [value_info("s", [2]), scalar_vi("c", FLOAT), value_info("y1s", [2, 3]),
                  value_info("y2s", [3])],
                 [tensor("one", [], [1.0])], opset=16)


def scan_case(d):
    s0, c0 = [0.5, -1.0], 2.0
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # [2,3]
    z = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]  # [3,2]
    w = [2.0, -3.0]
    args = pb(d, "s0", [2], s0) + pb(d, "c0", [], [c0]) + pb(d, "x", [2, 3], x)
    args += pb(d, "z", [3, 2], z) + pb(d, "w", [2], w)
    s, c, y1, y2 = list(s0), c0, [], []
    for k in range(3):
        xt = [x[0 * 3 + (2 - k)], x[1 * 3 + (2 - k)]]  # axis 1, reversed
        zt = z[2 * k:2 * k + 2]
        s = [s[i] + xt[i] * w[i] + zt[i] for i in range(2)]
        c += 1
        y1.append(list(s))
        y2.append(c)
    # y1s [2,3]: step k's [2] at column 2-k (reverse output direction), along axis 1.
    y1s = [y1[2 - j][i] for i in range(2) for j in range(3)]
    return args, [s, [c], y1s, y2]


# ---- Loop: y [2]; body y' = y + i * w (w outer), scan output y'.
def loop_model(trips_input):
    body = graph(
        [node("Cast", ["i"], ["fi"], "cast", [attr_int("to", FLOAT)]),
         node("Mul", ["fi", "w"], ["iw"], "mul"),
         node("Add", ["y_in", "iw"], ["y_out"], "add"),
         node("Identity", ["y_out"], ["scan_out"], "id")],
        [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), value_info("y_in", [2])],
        [scalar_vi("cond_in", BOOL), value_info("y_out", [2]), value_info("scan_out", [2])],
        name="loop_body")
    if trips_input:
        ins = ["M", "cond", "y0"]
        inputs = [scalar_vi("M", INT64), scalar_vi("cond", BOOL), value_info("y0", [2]),
                  value_info("w", [2])]
        inits = []
    else:
        ins = ["M", "", "y0"]
        inputs = [value_info("y0", [2]), value_info("w", [2])]
        inits = [tensor("M", [], [4], INT64, "q")]
    loop = node("Loop", ins, ["y", "ys"], "loop", [attr_graph("body", body)])
    return model([loop], inputs, [value_info("y", [2]), value_info("ys", [4, 2])], inits,
                 opset=16)


def loop_answer(y0, w, trips):
    y, ys = list(y0), []
    for i in range(trips):
        y = [y[j] + i * w[j] for j in range(2)]
        ys += y
    return [y, ys]


# ---- While loop: y doubles and s adds the iteration number while y < 10 (and i < M where
# the trip count is given); the condition is computed by the body from the loop-carried y.
# With per-step outputs, each step also gives p = y' + i and q = [y', -y'] (their rows are
# as many as the loop runs steps, known only once it ends).
def while_model(trips_input, scan_output=False, trips_const=None):
    outs = [scalar_vi("c", BOOL), scalar_vi("y_out", FLOAT), scalar_vi("s_out", FLOAT)]
    nodes = [node("Add", ["y_in", "y_in"], ["y_out"], "dbl"),
             node("Cast", ["i"], ["fi"], "cast", [attr_int("to", FLOAT)]),
             node("Add", ["s_in", "fi"], ["s_out"], "count"),
             node("Less", ["y_out", "ten"], ["c"], "less")]
    if scan_output:
        nodes += [node("Add", ["y_out", "fi"], ["p"], "step_p"),
                  node("Mul", ["y_out", "signs"], ["q"], "step_q")]
        outs += [scalar_vi("p", FLOAT), value_info("q", [2])]
    body = graph(nodes, [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL),
                         scalar_vi("y_in", FLOAT), scalar_vi("s_in", FLOAT)], outs, name="b")
    inputs = [scalar_vi("y0", FLOAT), scalar_vi("cond", BOOL)]
    if trips_input:
        inputs.append(scalar_vi("M", INT64))
    results = ["y", "s"] + (["ps", "qs"] if scan_output else [])
    trips = "M" if trips_input or trips_const is not None else ""
    loop = node("Loop", [trips, "cond", "y0", "zero"], results,
                "while_loop", [attr_graph("body", body)])
    outputs = [scalar_vi("y", FLOAT), scalar_vi("s", FLOAT)]
    if scan_output:
        outputs += [value_info("ps", ["steps"]), value_info("qs", ["steps", 2])]
    inits = [tensor("ten", [], [10.0]), tensor("zero", [], [0.0]),
             tensor("signs", [2], [1.0, -1.0])]
    if trips_const is not None:
        inits.append(tensor("M", [], [trips_const], INT64, "q"))
    return model([loop], inputs, outputs, inits, opset=16)


# A while loop whose condition stays true (y >= 0 for y0 >= 0): y += table[i], the table
# holding 3 values, so step 3's Gather reads past it.
def while_bounds_model():
    body = graph([node("Gather", ["table", "i"], ["t"], "lookup", [attr_int("axis", 0)]),
                  node("Add", ["y_in", "t"], ["y_out"], "add"),
                  node("GreaterOrEqual", ["y_out", "zero"], ["c"], "nonneg")],
                 [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), scalar_vi("y_in", FLOAT)],
                 [scalar_vi("c", BOOL), scalar_vi("y_out", FLOAT)], name="b")
    loop = node("Loop", ["", "go", "y0"], ["y"], "endless", [attr_graph("body", body)])
    return model([loop], [scalar_vi("y0", FLOAT)], [scalar_vi("y", FLOAT)],
                 [tensor("table", [3], [1.0, 2.0, 3.0]), tensor("zero", [], [0.0]),
                  tensor("go", [], [1], BOOL, "B")], opset=16)


# The outer Loop (2 steps) runs the doubling while loop on its state: 1 -> 16 -> 32.
def nested_while_model():
    wbody = graph([node("Add", ["y_in", "y_in"], ["y_out"], "dbl"),
                   node("Less", ["y_out", "ten"], ["c"], "less")],
                  [scalar_vi("j", INT64), scalar_vi("c_in", BOOL), scalar_vi("y_in", FLOAT)],
                  [scalar_vi("c", BOOL), scalar_vi("y_out", FLOAT)], name="wb")
    obody = graph([node("Loop", ["", "go", "x_in"], ["x_out"], "inner_while",
                        [attr_graph("body", wbody)])],
                  [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), scalar_vi("x_in", FLOAT)],
                  [scalar_vi("cond_in", BOOL), scalar_vi("x_out", FLOAT)], name="ob")
    loop = node("Loop", ["two", "", "y0"], ["y"], "outer", [attr_graph("body", obody)])
    return model([loop], [scalar_vi("y0", FLOAT)], [scalar_vi("y", FLOAT)],
                 [tensor("two", [], [2], INT64, "q"), tensor("ten", [], [10.0]),
                  tensor("go", [], [1], BOOL, "B")], opset=16)


# ---- While loops inside while loops. The inner one doubles y (starting from the outer
# state x) and adds bias (a graph input) and -x/2 (the outer state, read from the outer
# body's scope) until max(y) >= 100; the outer one carries x = y/4 and s += sum(y) while
# s < limit and i < M, giving y per step. `wrap`: the whole (without the per-step outputs)
# runs in a counted Loop of two steps, each starting from the last one's x and s (three
# loops deep).
def while_in_while_model(wrap=False):
    inner = graph([node("Mul", ["y_in", "two_f"], ["y2"], "dbl"),
                   node("Add", ["y2", "bias"], ["yb"], "add_bias"),
                   node("Mul", ["x_in", "half"], ["xh"], "half_x"),
                   node("Sub", ["yb", "xh"], ["y_out"], "sub_x"),
                   node("ReduceMax", ["y_out"], ["top"], "top", [attr_int("keepdims", 0)]),
                   node("Less", ["top", "hundred"], ["c"], "less")],
                  [scalar_vi("j", INT64), scalar_vi("c_in", BOOL), value_info("y_in", [2])],
                  [scalar_vi("c", BOOL), value_info("y_out", [2])], name="inner_body")
    outer = graph([node("Loop", ["", "go", "x_in"], ["y"], "inner_while",
                        [attr_graph("body", inner)]),
                   node("Mul", ["y", "quarter"], ["x_out"], "quarter_y"),
                   node("ReduceSum", ["y"], ["sy"], "sum_y", [attr_int("keepdims", 0)]),
                   node("Add", ["s_in", "sy"], ["s_out"], "acc"),
                   node("Less", ["s_out", "limit"], ["c"], "under")]
                  + ([] if wrap else [node("Identity", ["y"], ["p"], "step_y")]),
                  [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), value_info("x_in", [2]),
                   scalar_vi("s_in", FLOAT)],
                  [scalar_vi("c", BOOL), value_info("x_out", [2]), scalar_vi("s_out", FLOAT)]
                  + ([] if wrap else [value_info("p", [2])]), name="outer_body")
    loop_in = ["M", "go", "x_w" if wrap else "x0", "s_w" if wrap else "zero"]
    loop = node("Loop", loop_in, ["x", "s"] + ([] if wrap else ["ps"]), "outer_while",
                [attr_graph("body", outer)])
    outputs = [value_info("x", [2]), scalar_vi("s", FLOAT), value_info("ps", ["steps", 2])]
    nodes = [loop]
    if wrap:
        wbody = graph([loop], [scalar_vi("k", INT64), scalar_vi("cond_w", BOOL),
                               value_info("x_w", [2]), scalar_vi("s_w", FLOAT)],
                      [scalar_vi("cond_w", BOOL), value_info("x", [2]), scalar_vi("s", FLOAT)],
                      name="wrap_body")
        nodes = [node("Loop", ["two_i", "", "x0", "zero"], ["x", "s"], "wrap",
                      [attr_graph("body", wbody)])]
        outputs = outputs[:2]
    return model(nodes, [value_info("x0", [2]), value_info("bias", [2]), scalar_vi("limit", FLOAT),
                         scalar_vi("M", INT64)], outputs,
                 [tensor("two_f", [], [2.0]), tensor("half", [], [0.5]),
                  tensor("quarter", [], [0.25]), tensor("hundred", [], [100.0]),
                  tensor("zero", [], [0.0]), tensor("two_i", [], [2], INT64, "q"),
                  tensor("go", [], [1], BOOL, "B")], opset=16)


def while_in_while_answer(x0, bias, limit, trips, wrap=False):
    x, s = list(x0), 0.0
    for _ in range(2 if wrap else 1):
        ps, i = [], 0
        while i < trips:
            y = list(x)
            while True:
                y = [2 * y[k] + bias[k] - 0.5 * x[k] for k in range(2)]
                if not max(y) < 100:
                    break
            x = [v * 0.25 for v in y]
            s += sum(y)
            ps += y
            i += 1
            if not s < limit:
                break
    return [x, [s]] if wrap else [x, [s], (ps, [len(ps) // 2, 2])]


# ---- A counted Loop of 1000 steps inside a while loop: step j of the inner loop gives
# j * x (x the outer state, read from the outer scope) and counts a += 1; the outer one
# carries x + 1 and t = max_j(j * x) + a while t < limit.
def counted_in_while_model():
    inner = graph([node("Cast", ["j"], ["fj"], "cast_j", [attr_int("to", FLOAT)]),
                   node("Mul", ["fj", "x_in"], ["q"], "jx"),
                   node("Add", ["a_in", "one"], ["a_out"], "count")],
                  [scalar_vi("j", INT64), scalar_vi("c_in", BOOL), scalar_vi("a_in", FLOAT)],
                  [scalar_vi("c_in", BOOL), scalar_vi("a_out", FLOAT), scalar_vi("q", FLOAT)],
                  name="inner_body")
    outer = graph([node("Loop", ["thousand", "", "zero"], ["a", "qs"], "inner_loop",
                        [attr_graph("body", inner)]),
                   node("ReduceMax", ["qs"], ["m"], "max_q", [attr_int("keepdims", 0)]),
                   node("Add", ["m", "a"], ["t_out"], "t"),
                   node("Add", ["x_in", "one"], ["x_out"], "inc"),
                   node("Less", ["t_out", "limit"], ["c"], "under")],
                  [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), scalar_vi("x_in", FLOAT),
                   scalar_vi("t_in", FLOAT)],
                  [scalar_vi("c", BOOL), scalar_vi("x_out", FLOAT), scalar_vi("t_out", FLOAT)],
                  name="outer_body")
    loop = node("Loop", ["", "go", "x0", "zero"], ["x", "t"], "outer_while",
                [attr_graph("body", outer)])
    return model([loop], [scalar_vi("x0", FLOAT), scalar_vi("limit", FLOAT)],
                 [scalar_vi("x", FLOAT), scalar_vi("t", FLOAT)],
                 [tensor("thousand", [], [1000], INT64, "q"), tensor("one", [], [1.0]),
                  tensor("zero", [], [0.0]), tensor("go", [], [1], BOOL, "B")], opset=16)


def counted_in_while_answer(x0, limit):
    x, t = x0, 0.0
    while True:
        t = 999 * x + 1000 if x >= 0 else 1000.0
        x += 1
        if not t < limit:
            return [[x], [t]]


# ---- A while loop that appends to a sequence (a Python list appended to in a loop, as
# PyTorch exports it): seq starts as [x] and gets y' = 2 y in each step while y' < 10 (and
# i < M); read back stacked, concatenated, by its length and at -1 and 0. `insert_at`: the
# body inserts at that position instead of appending (not a per-step output: refused).
# `sequence_out`: the sequence itself is a graph output.
def appending_model(insert_at=None, sequence_out=False, trips_const=None):
    ins = ["seq_in", "y_out"] + (["zero_i"] if insert_at is not None else [])
    body = graph([node("Add", ["y_in", "y_in"], ["y_out"], "dbl"),
                  node("ReduceMax", ["y_out"], ["top"], "top", [attr_int("keepdims", 0)]),
                  node("Less", ["top", "ten"], ["c"], "less"),
                  node("SequenceInsert", ins, ["seq_out"], "append")],
                 [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), value_info("y_in", [2]),
                  field_bytes(1, "seq_in")],
                 [scalar_vi("c", BOOL), value_info("y_out", [2]), field_bytes(1, "seq_out")],
                 name="b")
    nodes = [node("SequenceConstruct", ["x"], ["seq0"], "construct"),
             node("ReduceMax", ["x"], ["top0"], "top0", [attr_int("keepdims", 0)]),
             node("Less", ["top0", "ten"], ["go"], "go"),
             node("Loop", ["M", "go", "x", "seq0"], ["y", "seq"], "appending",
                  [attr_graph("body", body)])]
    outputs = [value_info("y", [2])]
    if sequence_out:
        outputs.append(field_bytes(1, "seq"))
    else:
        nodes += [node("ConcatFromSequence", ["seq"], ["stacked"], "stack",
                       [attr_int("axis", 1), attr_int("new_axis", 1)]),
                  node("ConcatFromSequence", ["seq"], ["joined"], "cat", [attr_int("axis", 0)]),
                  node("SequenceLength", ["seq"], ["length"], "len"),
                  node("SequenceAt", ["seq", "last_i"], ["last"], "at_last"),
                  node("SequenceAt", ["seq", "zero_i"], ["first"], "at_first")]
        outputs += [value_info("stacked", [2, "n"]), value_info("joined", ["m"]),
                    scalar_vi("length", INT64), value_info("last", [2]),
                    value_info("first", [2])]
    inputs, inits = [value_info("x", [2])], [tensor("ten", [], [10.0]),
                                             tensor("last_i", [], [-1], INT64, "q"),
                                             tensor("zero_i", [], [insert_at or 0], INT64, "q")]
    if trips_const is None:
        inputs.append(scalar_vi("M", INT64))
    else:
        inits.append(tensor("M", [], [trips_const], INT64, "q"))
    return model(nodes, inputs, outputs, inits, opset=16)


def appending_answer(x, trips):
    y, i, seq = list(x), 0, [list(x)]
    go = max(x) < 10 and trips > 0
    while go:
        y = [v + v for v in y]
        seq.append(y)
        i += 1
        go = max(y) < 10 and i < trips
    n = len(seq)
    stacked = [seq[t][r] for r in range(2) for t in range(n)]
    return [y, (stacked, [2, n]), ([v for e in seq for v in e], [2 * n]), [n], seq[-1], seq[0]]


def while_answer(y0, trips, cond, scan_output=False):
    y, s, i, go = y0, 0.0, 0, bool(cond) and (trips is None or trips > 0)
    ps, qs = [], []
    while go:
        y, s = y + y, s + i
        ps.append(y + i)
        qs += [y, -y]
        i += 1
        go = y < 10 and (trips is None or i < trips)
    return [[y], [s]] + ([(ps, [i]), (qs, [i, 2])] if scan_output else [])


# ---- Nested loops: the outer Loop (3 steps) runs an inner Loop (2 steps) on its state and
# adds its own iteration number; the inner one doubles its state and adds w (an outer value
# of both) times its iteration number. The outer Loop also returns each step's state.
def nested_model():
    inner = graph([node("Cast", ["j"], ["fj"], "cast_j", [attr_int("to", FLOAT)]),
                   node("Mul", ["fj", "w"], ["jw"], "mul_w"),
                   node("Add", ["z_in", "z_in"], ["z2"], "dbl"),
                   node("Add", ["z2", "jw"], ["z_out"], "add_jw")],
                  [scalar_vi("j", INT64), scalar_vi("c_in", BOOL), value_info("z_in", [2])],
                  [scalar_vi("c_in", BOOL), value_info("z_out", [2])], name="inner_body")
    outer = graph([node("Loop", ["two", "", "y_in"], ["z"], "inner_loop",
                        [attr_graph("body", inner)]),
                   node("Cast", ["i"], ["fi"], "cast_i", [attr_int("to", FLOAT)]),
                   node("Add", ["z", "fi"], ["y_out"], "add_i"),
                   node("Identity", ["y_out"], ["scan_out"], "id")],
                  [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), value_info("y_in", [2])],
                  [scalar_vi("cond_in", BOOL), value_info("y_out", [2]),
                   value_info("scan_out", [2])], name="outer_body")
    loop = node("Loop", ["three", "", "y0"], ["y", "ys"], "outer_loop",
                [attr_graph("body", outer)])
    return model([loop], [value_info("y0", [2]), value_info("w", [2])],
                 [value_info("y", [2]), value_info("ys", [3, 2])],
                 [tensor("two", [], [2], INT64, "q"), tensor("three", [], [3], INT64, "q")],
                 opset=16)


def nested_answer(y0, w):
    y, ys = list(y0), []
    for i in range(3):
        z = list(y)
        for j in range(2):
            z = [z[k] * 2 + j * w[k] for k in range(2)]
        y = [z[k] + i for k in range(2)]
        ys += y
    return [y, ys]


# ---- If: then = x * a, else = x + b (a, b outer); different shapes: else = concat(x, x).
def if_model(same_shape):
    then_b = graph([node("Mul", ["x", "a"], ["t"], "then_mul")], [], [value_info("t", [3])],
                   name="then")
    if same_shape:
        else_b = graph([node("Add", ["x", "b"], ["e"], "else_add")], [], [value_info("e", [3])],
                       name="else")
    else:
        else_b = graph([node("Concat", ["x", "x"], ["e"], "else_cat", [attr_int("axis", 0)])],
                       [], [value_info("e", [6])], name="else")
    # The condition is computed (sign > 0), so it is not known while importing (`nnc run`
    # gives the importer the graph inputs' values) and the If stays a node for inline-if.
    n = node("If", ["cond"], ["y"], "branch",
             [attr_graph("then_branch", then_b), attr_graph("else_branch", else_b)])
    positive = node("Greater", ["sign", "zero"], ["cond"], "positive")
    return model([positive, n], [scalar_vi("sign", FLOAT), value_info("x", [3]),
                                 value_info("a", [3]), value_info("b", [3])],
                 [value_info("y", [3])], [tensor("zero", [], [0.0])], opset=16)


def run_case(targets, path, args, expect, what, out_root):
    """Each output's values close to `expect`'s; an expected (values, shape) pair checks the
    shape too."""
    def matches(got, e):
        if isinstance(e, tuple):
            return close(list(got[0]), e[0]) and list(got[1]) == list(e[1])
        return close(list(got[0]), e)
    clitest.run_case(NNC, targets, path, args, expect, what, out_root, matches)


def expect_error(targets, path, args, want, what):
    for t in targets:
        r = run([NNC, "run", path, "--target", t, "-q"] + args)
        w = f"{what} --target {t}"
        check(r.returncode == 1, f"{w}: exit {r.returncode}, not 1")
        check(want in r.stderr, f"{w}: stderr lacks '{want}': {r.stderr!r}")


def main():
    with tempfile.TemporaryDirectory(prefix="nnc-control-flow-") as tmp:
        targets = clitest.targets(NNC, tmp)

        d = os.path.join(tmp, "scan")
        os.makedirs(d)
        path = os.path.join(d, "scan.onnx")
        write(path, scan_model())
        args, expect = scan_case(d)
        run_case(targets, path, args, expect, "Scan", d)
        print(f"ok: Scan with axes, directions and an outer value ({', '.join(targets)})")

        d = os.path.join(tmp, "loop")
        os.makedirs(d)
        path = os.path.join(d, "loop.onnx")
        write(path, loop_model(False))
        y0, w = [1.0, -2.0], [0.5, 3.0]
        args = pb(d, "y0", [2], y0) + pb(d, "w", [2], w)
        run_case(targets, path, args, loop_answer(y0, w, 4), "Loop M=4", d)
        path = os.path.join(d, "loop_inputs.onnx")
        write(path, loop_model(True))
        for trips, cond in [(3, 1), (5, 1), (3, 0)]:
            dd = os.path.join(d, f"m{trips}_c{cond}")
            os.makedirs(dd)
            a = pb(dd, "M", [], [trips], INT64) + pb(dd, "cond", [], [cond], BOOL)
            a += pb(dd, "y0", [2], y0) + pb(dd, "w", [2], w)
            run_case(targets, path, a, loop_answer(y0, w, trips * cond),
                     f"Loop M={trips} cond={cond} as inputs", dd)
        print(f"ok: Loop, constant and run-time trip counts ({', '.join(targets)})")

        d = os.path.join(tmp, "nested")
        os.makedirs(d)
        path = os.path.join(d, "nested.onnx")
        write(path, nested_model())
        run_case(targets, path, pb(d, "y0", [2], y0) + pb(d, "w", [2], w), nested_answer(y0, w),
                 "nested Loops", d)
        print(f"ok: a Loop inside a Loop ({', '.join(targets)})")

        d = os.path.join(tmp, "if")
        os.makedirs(d)
        x, a_, b_ = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [10.0, 20.0, 30.0]
        for same in [True, False]:
            path = os.path.join(d, f"if_{same}.onnx")
            write(path, if_model(same))
            for cond in [1, 0]:
                dd = os.path.join(d, f"{same}_{cond}")
                os.makedirs(dd)
                args = pb(dd, "sign", [], [1.0 if cond else -1.0]) + pb(dd, "x", [3], x)
                args += pb(dd, "a", [3], a_) + pb(dd, "b", [3], b_)
                if cond:
                    y = [x[i] * a_[i] for i in range(3)]
                elif same:
                    y = [x[i] + b_[i] for i in range(3)]
                else:
                    y = x + x
                run_case(targets, path, args, [y],
                         f"If ({'one type' if same else 'two shapes'}) cond={cond}", dd)
        print(f"ok: If with a run-time condition ({', '.join(targets)})")

        # While loops: a body that computes the loop's condition from data.
        d = os.path.join(tmp, "while")
        os.makedirs(d)
        for trips_input in [False, True]:
            for scan_output in [False, True]:
                path = os.path.join(d, f"while_{trips_input}_{scan_output}.onnx")
                write(path, while_model(trips_input, scan_output))
                cases = [(1.0, None, 1), (20.0, None, 1), (1.0, None, 0)] if not trips_input \
                    else [(1.0, 100, 1), (1.0, 2, 1), (1.0, 0, 1), (20.0, 5, 1), (3.0, 100, 0)]
                for y0, trips, cond in cases:
                    dd = os.path.join(d, f"{trips_input}_{scan_output}_{y0}_{trips}_{cond}")
                    os.makedirs(dd)
                    a = pb(dd, "y0", [], [y0]) + pb(dd, "cond", [], [cond], BOOL)
                    if trips_input:
                        a += pb(dd, "M", [], [trips], INT64)
                    run_case(targets, path, a, while_answer(y0, trips, cond, scan_output),
                             f"while loop y0={y0} M={trips} cond={cond}"
                             f"{' with per-step outputs' if scan_output else ''}", dd)
        print(f"ok: Loop whose body computes its condition, with and without per-step outputs "
              f"({', '.join(targets)})")

        # With per-step outputs and no trip count the while loop only counts the steps (a
        # counted loop then computes the outputs): it carries the condition, the iteration
        # number and y, which the condition reads, but not s.
        r = run([NNC, "inspect", os.path.join(d, "while_False_True.onnx"), "--after", "import"])
        counting = [ln for ln in r.stdout.splitlines() if "while = 1" in ln]
        check(r.returncode == 0 and len(counting) == 1 and "num_carried = 3" in counting[0]
              and "%s_in" not in counting[0],
              f"the counting while loop carries only what its condition reads: {counting!r} "
              f"{r.stderr!r}")
        # With a trip count M given as an input, one while loop over range(M) (its length
        # known once the graph is specialized on M's value) writes them: no counting loop.
        r = run([NNC, "inspect", os.path.join(d, "while_True_True.onnx"), "--after", "import"])
        loops = [ln for ln in r.stdout.splitlines() if " = scan(" in ln]
        check(r.returncode == 0 and len(loops) == 1 and "while = 1" in loops[0]
              and "num_scan_inputs = 1" in loops[0] and "%s_in" in loops[0],
              f"one while loop over range(M) with per-step outputs: {loops!r} {r.stderr!r}")

        # With a constant trip count M the while loop with per-step outputs runs once, writing
        # them into M rows of which the rows it ran are taken (no counting loop).
        for trips in [100, 2, 1, 0]:
            path = os.path.join(d, f"while_const_{trips}.onnx")
            write(path, while_model(False, True, trips_const=trips))
            for y0, cond in [(1.0, 1), (20.0, 1), (3.0, 0)]:
                dd = os.path.join(d, f"const_{trips}_{y0}_{cond}")
                os.makedirs(dd)
                a = pb(dd, "y0", [], [y0]) + pb(dd, "cond", [], [cond], BOOL)
                run_case(targets, path, a, while_answer(y0, trips, cond, True),
                         f"while loop with per-step outputs, M={trips} (constant) y0={y0} "
                         f"cond={cond}", dd)
        r = run([NNC, "inspect", os.path.join(d, "while_const_100.onnx"), "--after", "import"])
        loops = [ln for ln in r.stdout.splitlines() if " = scan(" in ln]
        check(r.returncode == 0 and len(loops) == 1 and "max_steps = 100" in loops[0]
              and "while = 1" in loops[0],
              f"one while loop with per-step outputs of 100 rows: {loops!r} {r.stderr!r}")
        print(f"ok: a while loop with per-step outputs and a constant trip count runs once "
              f"({', '.join(targets)})")

        # A while loop appending to a sequence: its length known only once the loop ends.
        path = os.path.join(d, "appending.onnx")
        write(path, appending_model())
        for x, trips in [([0.5, -1.0], 100), ([0.5, 2.0], 100), ([20.0, 1.0], 100),
                         ([0.5, 1.0], 2), ([0.5, 1.0], 0)]:
            dd = os.path.join(d, f"appending_{x[0]}_{x[1]}_{trips}")
            os.makedirs(dd)
            a = pb(dd, "x", [2], x) + pb(dd, "M", [], [trips], INT64)
            run_case(targets, path, a, appending_answer(x, trips),
                     f"while loop appending to a sequence, x={x} M={trips}", dd)
        # The same with a constant trip count: one loop writes the steps (max_steps rows).
        for trips in [100, 2]:
            path = os.path.join(d, f"appending_const_{trips}.onnx")
            write(path, appending_model(trips_const=trips))
            for x in [[0.5, -1.0], [20.0, 1.0]]:
                dd = os.path.join(d, f"appending_const_{trips}_{x[0]}")
                os.makedirs(dd)
                run_case(targets, path, pb(dd, "x", [2], x), appending_answer(x, trips),
                         f"while loop appending to a sequence, x={x} M={trips} (constant)", dd)
        print(f"ok: a while loop appending to a sequence, read back stacked, concatenated, by "
              f"its length and by position ({', '.join(targets)})")

        # inspect --kernels lists a while loop's body once (its kernels run once per step),
        # named after the loop node; compile, whose objects hold no loops, refuses it.
        path = os.path.join(d, "while_True_False.onnx")
        r = run([NNC, "inspect", path, "--kernels"])
        body = [ln for ln in r.stdout.splitlines() if ln.startswith("kernel n")]
        check(r.returncode == 0 and len([ln for ln in body if "_loop_" in ln]) >= 3,
              f"inspect --kernels of a while loop: exit {r.returncode}: {r.stderr!r}")
        r = run([NNC, "compile", path, "-o", os.path.join(d, "while.o")])
        check(r.returncode == 1 and "cannot unroll a while loop" in r.stderr,
              f"compile of a while loop: exit {r.returncode}: {r.stderr!r}")
        print("ok: inspect --kernels lists a while loop's body; compile refuses it")

        # A while loop that never stops by itself reads past a table in its fourth step: the
        # index error stops it (on every target), instead of a loop that runs forever.
        path = os.path.join(d, "while_bounds.onnx")
        write(path, while_bounds_model())
        expect_error(targets, path, pb(d, "y0", [], [1.0]),
                     "index 3 is out of range for an axis of size 3", "while loop past a table")
        print(f"ok: an index error stops a while loop ({', '.join(targets)})")

        # A while loop inside a Loop's body (2 steps): a loop inside the outer one's loop.
        path = os.path.join(d, "nested_while.onnx")
        write(path, nested_while_model())
        a = pb(d, "y0", [], [1.0])
        run_case(targets, path, a, [[16.0 + 16.0]], "a while loop inside a Loop", d)
        print(f"ok: a while loop inside a Loop ({', '.join(targets)})")

        # While loops inside while loops, run as loops (neither one's steps are known before
        # it runs), with per-step outputs of the outer one and three loops deep.
        path = os.path.join(d, "while_in_while.onnx")
        write(path, while_in_while_model())
        wrapped = os.path.join(d, "while_in_while_wrapped.onnx")
        write(wrapped, while_in_while_model(wrap=True))
        for x0, bias, limit, trips in [([1.0, 2.0], [0.5, 0.25], 700.0, 100),
                                       ([1.0, 2.0], [0.5, 0.25], 0.0, 100),
                                       ([3.0, 0.5], [1.0, 2.0], 1e9, 5),
                                       ([1.0, 2.0], [0.5, 0.25], 700.0, 0)]:
            dd = os.path.join(d, f"wiw_{x0[0]}_{limit}_{trips}")
            os.makedirs(dd)
            a = pb(dd, "x0", [2], x0) + pb(dd, "bias", [2], bias)
            a += pb(dd, "limit", [], [limit]) + pb(dd, "M", [], [trips], INT64)
            run_case(targets, path, a, while_in_while_answer(x0, bias, limit, trips),
                     f"a while loop inside a while loop, limit={limit} M={trips}", dd)
            run_case(targets, wrapped, a, while_in_while_answer(x0, bias, limit, trips, True),
                     f"three loops deep, limit={limit} M={trips}", dd)
        path = os.path.join(d, "counted_in_while.onnx")
        write(path, counted_in_while_model())
        for x0, limit in [(1.0, 5000.0), (-1.0, 0.0), (0.5, 20000.0)]:
            dd = os.path.join(d, f"ciw_{x0}_{limit}")
            os.makedirs(dd)
            run_case(targets, path, pb(dd, "x0", [], [x0]) + pb(dd, "limit", [], [limit]),
                     counted_in_while_answer(x0, limit),
                     f"a Loop of 1000 steps inside a while loop, x0={x0} limit={limit}", dd)
        print(f"ok: while loops inside while loops, three deep, and a long Loop inside one "
              f"({', '.join(targets)})")

        d = os.path.join(tmp, "errors")
        os.makedirs(d)
        # A while loop inserting at the front of a sequence, and one whose appended sequence
        # is a graph output: refused, naming the node or the output.
        a = pb(d, "x", [2], [0.5, 1.0]) + pb(d, "M", [], [100], INT64)
        path = os.path.join(d, "inserting.onnx")
        write(path, appending_model(insert_at=0))
        expect_error(targets, path, a, "node 'appending' (Loop): the condition of a loop "
                     "carrying sequences", "a while loop inserting into a sequence")
        path = os.path.join(d, "sequence_out.onnx")
        write(path, appending_model(sequence_out=True))
        expect_error(targets, path, a, "graph output 'seq' is a sequence whose length is known "
                     "only at run time", "an appended sequence as a graph output")
        # An absurd trip count: refused, not allocated.
        body = graph([node("Add", ["y_in", "y_in"], ["y_out"], "dbl")],
                     [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), scalar_vi("y_in", FLOAT)],
                     [scalar_vi("cond_in", BOOL), scalar_vi("y_out", FLOAT),
                      scalar_vi("y_out", FLOAT)], name="b")
        path = os.path.join(d, "huge.onnx")
        write(path, model([node("Loop", ["M", "", "y0"], ["y", "ys"], "huge_loop",
                                [attr_graph("body", body)])],
                          [scalar_vi("y0", FLOAT)], [scalar_vi("y", FLOAT)],
                          [tensor("M", [], [1 << 40], INT64, "q")], opset=16))
        for t in targets:
            r = run([NNC, "run", path, "--target", t, "-q"] + pb(d, "y0", [], [1.0]))
            check(r.returncode == 1 and "limit" in r.stderr,
                  f"Loop of 2^40 steps --target {t}: exit {r.returncode}: {r.stderr!r}")
        # A body reading a value that no scope defines.
        body = graph([node("Add", ["y_in", "nowhere"], ["y_out"], "reads_nothing")],
                     [scalar_vi("i", INT64), scalar_vi("cond_in", BOOL), scalar_vi("y_in", FLOAT)],
                     [scalar_vi("cond_in", BOOL), scalar_vi("y_out", FLOAT)], name="b")
        path = os.path.join(d, "missing.onnx")
        write(path, model([node("Loop", ["M", "", "y0"], ["y"], "outer_loop",
                                [attr_graph("body", body)])],
                          [scalar_vi("y0", FLOAT)], [scalar_vi("y", FLOAT)],
                          [tensor("M", [], [3], INT64, "q")], opset=16))
        expect_error(["interp"], path, pb(d, "y0", [], [1.0]),
                     "dangling input 'nowhere'", "missing outer value")
        print(f"ok: control-flow errors ({', '.join(targets)})")
    return clitest.finish()


if __name__ == "__main__":
    sys.exit(main())
