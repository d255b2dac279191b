// Lowering of the shape and data-movement ops, checked against the interpreter with the
// kernel evaluator on random inputs (several shapes and dtypes, constant and runtime
// shape-like operands, negative and out-of-range indices).
#include "LowerTestUtil.h"
#include "TestTarget.h"

using namespace nnc;
using namespace nnc::lowertest;

namespace {

const DType kDTypes[] = {DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool};

/// A one-node graph under construction: inputs with their random values and constants.
struct OneNode {
  Graph g;
  std::vector<Tensor> inputs;
  std::mt19937 rng{1234};

  Value *input(DType t, const Extents &e, double lo = -3, double hi = 3) {
    inputs.push_back(randomTensor(t, e, rng, lo, hi));
    return g.addInput("x" + std::to_string(inputs.size()), TensorType(t, shapeFromExtents(e)));
  }
  /// An input holding exactly `v`.
  Value *input(const Tensor &v) {
    inputs.push_back(v);
    return g.addInput("x" + std::to_string(inputs.size()), v.type());
  }
  Value *constant(const Tensor &t) { return constantValue(g, t); }

  /// Creates the node, checks its lowering and returns it (null if it could not be made).
  Node *check(OpKind k, std::vector<Value *> ops, AttrMap attrs, const std::string &what,
              int numResults = -1) {
    Expected<Node *> n = g.createInferred(k, std::move(ops), std::move(attrs), "n", numResults);
    EXPECT_TRUE(n) << what << ": " << n.error().message();
    if (!n)
      return nullptr;
    checkNode(**n, inputs, what);
    return *n;
  }
};

std::string dt(DType t) { return std::string(dtypeName(t)); }
Attribute ints(std::vector<int64_t> v) { return v; }

} // namespace

TEST(LowerDataMovement, ShapeOf) {
  OneNode t;
  Value *x = t.input(DType::F32, {2, 3, 4, 5});
  t.check(OpKind::ShapeOf, {x}, {}, "shape");
  t.check(OpKind::ShapeOf, {x}, {{"start", int64_t(1)}, {"end", int64_t(-1)}}, "shape 1:-1");
}

TEST(LowerDataMovement, ReshapeFamily) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {2, 3, 1, 5});
    t.check(OpKind::Reshape, {x, t.constant(i64Vector({5, -1}))}, {}, "reshape " + dt(d));
    t.check(OpKind::Flatten, {x}, {{"axis", int64_t(2)}}, "flatten " + dt(d));
    t.check(OpKind::Squeeze, {x}, {{"axes", ints({2})}}, "squeeze " + dt(d));
    t.check(OpKind::Unsqueeze, {x}, {{"axes", ints({0, -1})}}, "unsqueeze " + dt(d));
  }
}

TEST(LowerDataMovement, StorageOnlyCopy) {
  OneNode t;
  Value *x = t.input(DType::F8E4M3FN, {3, 4});
  t.check(OpKind::Transpose, {x}, {{"perm", ints({1, 0})}}, "transpose f8");
  t.check(OpKind::Flatten, {x}, {{"axis", int64_t(0)}}, "flatten f8");
}

TEST(LowerDataMovement, Transpose) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {2, 3, 5, 7});
    t.check(OpKind::Transpose, {x}, {{"perm", ints({0, 2, 3, 1})}}, "transpose " + dt(d));
    t.check(OpKind::Transpose, {x}, {{"perm", ints({3, 2, 1, 0})}}, "transpose rev " + dt(d));
    // Tiled: the input's contiguous dim (11) goes to position 1, a loop (9) between it and the
    // output's last dim (6), tails in both tiled dims.
    Value *y = t.input(d, {2, 9, 6, 11});
    t.check(OpKind::Transpose, {y}, {{"perm", ints({0, 3, 1, 2})}}, "transpose tiled " + dt(d));
  }
  OneNode big;
  Value *x = big.input(DType::F32, {300, 257});
  big.check(OpKind::Transpose, {x}, {{"perm", ints({1, 0})}}, "transpose big");
}

TEST(LowerDataMovement, Expand) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {3, 1, 5});
    t.check(OpKind::Expand, {x, t.constant(i64Vector({2, 1, 4, 1}))}, {}, "expand " + dt(d));
    Value *s = t.input(d, {});
    t.check(OpKind::Expand, {s, t.constant(i64Vector({3, 2}))}, {}, "expand scalar " + dt(d));
  }
}

TEST(LowerDataMovement, ConcatSplit) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *a = t.input(d, {2, 3, 4}), *b = t.input(d, {2, 1, 4}), *c = t.input(d, {2, 0, 4});
    t.check(OpKind::Concat, {a, b, c, a}, {{"axis", int64_t(1)}}, "concat " + dt(d));
    t.check(OpKind::Concat, {a, a}, {{"axis", int64_t(-1)}}, "concat last " + dt(d));
    t.check(OpKind::Concat, {a, a}, {{"axis", int64_t(0)}}, "concat first " + dt(d));
    t.check(OpKind::Split, {a}, {{"axis", int64_t(2)}, {"sizes", ints({1, 3})}},
            "split " + dt(d), 2);
    t.check(OpKind::Split, {a}, {{"axis", int64_t(1)}, {"sizes", ints({1, 0, 2})}},
            "split 3 " + dt(d), 3);
  }
}

TEST(LowerDataMovement, SliceConstant) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {5, 7, 4});
    t.check(OpKind::Slice, {x, t.constant(i64Vector({1, -2})), t.constant(i64Vector({4, 100}))},
            {}, "slice " + dt(d));
    t.check(OpKind::Slice,
            {x, t.constant(i64Vector({-1, 6})), t.constant(i64Vector({-100, 0})),
             t.constant(i64Vector({0, -2})), t.constant(i64Vector({-2, -3}))},
            {}, "slice negative steps " + dt(d));
    t.check(OpKind::Slice,
            {x, t.constant(i64Vector({0})), t.constant(i64Vector({7})),
             t.constant(i64Vector({1})), t.constant(i64Vector({3}))},
            {}, "slice step 3 " + dt(d));
  }
}

TEST(LowerDataMovement, SliceRuntimeOperands) {
  // Starts, axes and steps read at run time (the result shape is static through its
  // declared type). Build with constants to infer the type, then rebuild with inputs.
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {{{1, -2}, {4, 100}, {0, 1}, {1, 1}},
                        {{-1, 6}, {-100, 0}, {0, -2}, {-2, -3}},
                        {{100}, {-100}, {2}, {-1}}};
  for (const Case &c : cases) {
    OneNode t;
    Value *x = t.input(DType::F32, {5, 7, 4});
    Expected<Node *> ref = t.g.createInferred(
        OpKind::Slice, {x, t.constant(i64Vector(c.starts)), t.constant(i64Vector(c.ends)),
                        t.constant(i64Vector(c.axes)), t.constant(i64Vector(c.steps))});
    ASSERT_TRUE(ref) << ref.error().message();
    TensorType outType = (*ref)->result()->type();
    Value *s = t.input(i64Vector(c.starts));
    Value *e = t.input(i64Vector(c.ends));
    Value *a = t.input(i64Vector(c.axes));
    Value *st = t.input(i64Vector(c.steps));
    Node *n = t.g.createNode(OpKind::Slice, {x, s, e, a, st}, {outType});
    checkNode(*n, t.inputs, "slice runtime " + outType.str());
  }
}

TEST(LowerDataMovement, Pad) {
  for (const char *mode : {"constant", "reflect", "edge", "wrap"})
    for (DType d : kDTypes) {
      OneNode t;
      Value *x = t.input(d, {3, 4, 5});
      std::string what = std::string("pad ") + mode + " " + dt(d);
      t.check(OpKind::Pad, {x, t.constant(i64Vector({1, 0, 2, 2, 3, 0}))},
              {{"mode", std::string(mode)}}, what);
      t.check(OpKind::Pad, {x, t.constant(i64Vector({0, -1, 4, 1, 2, -2}))},
              {{"mode", std::string(mode)}}, what + " crop");
      if (std::string(mode) == "constant") {
        Value *v = t.input(d, {});
        t.check(OpKind::Pad, {x, t.constant(i64Vector({1, 1, 1, 1, 1, 1})), v},
                {{"mode", std::string(mode)}}, what + " value");
      }
    }
}

TEST(LowerDataMovement, PadRuntimePads) {
  for (const char *mode : {"constant", "reflect", "edge", "wrap"}) {
    OneNode t;
    Value *x = t.input(DType::F32, {3, 4, 5});
    std::vector<int64_t> pads{0, -1, 7, 1, 2, -2};
    Expected<Node *> ref = t.g.createInferred(OpKind::Pad, {x, t.constant(i64Vector(pads))},
                                              {{"mode", std::string(mode)}});
    ASSERT_TRUE(ref) << ref.error().message();
    Value *p = t.input(i64Vector(pads));
    Node *n = t.g.createNode(OpKind::Pad, {x, p}, {(*ref)->result()->type()},
                             {{"mode", std::string(mode)}});
    checkNode(*n, t.inputs, std::string("pad runtime ") + mode);
  }
}

TEST(LowerDataMovement, Tile) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {2, 1, 3});
    t.check(OpKind::Tile, {x, t.constant(i64Vector({2, 3, 1}))}, {}, "tile " + dt(d));
  }
}

TEST(LowerDataMovement, Gather) {
  for (DType d : kDTypes)
    for (int64_t axis : {0, 1, -1}) {
      OneNode t;
      Value *x = t.input(d, {4, 5, 3});
      int64_t dim = axis == 0 ? 4 : axis == 1 ? 5 : 3;
      Value *i32 = t.input(DType::I32, {2, 3}, -dim, dim - 1);
      t.check(OpKind::Gather, {x, i32}, {{"axis", axis}}, "gather i32 " + dt(d));
      Value *i64 = t.input(DType::I64, {}, -dim, dim - 1);
      t.check(OpKind::Gather, {x, i64}, {{"axis", axis}}, "gather scalar " + dt(d));
      // Constant indices: a fixed offset for a scalar, no range checks for a tensor.
      Value *c0 = t.constant(Tensor::fromVector<int64_t>(DType::I64, {}, {dim - 1}));
      t.check(OpKind::Gather, {x, c0}, {{"axis", axis}}, "gather constant scalar " + dt(d));
      Value *cn = t.constant(Tensor::fromVector<int64_t>(DType::I64, {}, {-dim}));
      t.check(OpKind::Gather, {x, cn}, {{"axis", axis}}, "gather constant -dim " + dt(d));
      Value *cv = t.constant(Tensor::fromVector<int64_t>(DType::I64, {3}, {1, -1, 0}));
      t.check(OpKind::Gather, {x, cv}, {{"axis", axis}}, "gather constant vector " + dt(d));
    }
}

TEST(LowerDataMovement, GatherElements) {
  for (DType d : kDTypes)
    for (int64_t axis : {0, 1}) {
      OneNode t;
      Value *x = t.input(d, {4, 5});
      Value *i = t.input(DType::I64, {3, 4}, axis == 0 ? -4 : -5, axis == 0 ? 3 : 4);
      t.check(OpKind::GatherElements, {x, i}, {{"axis", axis}}, "gather_elements " + dt(d));
    }
}

TEST(LowerDataMovement, GatherND) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {3, 4, 5});
    Value *i = t.input(DType::I64, {2, 2}, -3, 2);
    t.check(OpKind::GatherND, {x, i}, {{"batch_dims", int64_t(0)}}, "gather_nd " + dt(d));
    Value *b = t.input(DType::I64, {3, 2, 1}, -4, 3);
    t.check(OpKind::GatherND, {x, b}, {{"batch_dims", int64_t(1)}}, "gather_nd batch " + dt(d));
  }
}

TEST(LowerDataMovement, ScatterElements) {
  for (const char *red : {"none", "add", "mul", "max", "min"})
    for (DType d : kDTypes) {
      OneNode t;
      Value *x = t.input(d, {4, 5});
      Value *i = t.input(DType::I64, {3, 5}, -4, 3); // duplicates likely
      Value *u = t.input(d, {3, 5});
      t.check(OpKind::ScatterElements, {x, i, u},
              {{"axis", int64_t(0)}, {"reduction", std::string(red)}},
              std::string("scatter_elements ") + red + " " + dt(d));
    }
}

TEST(LowerDataMovement, ScatterND) {
  for (const char *red : {"none", "add", "mul", "max", "min"})
    for (DType d : kDTypes) {
      OneNode t;
      Value *x = t.input(d, {4, 3, 2});
      Value *i = t.input(DType::I64, {5, 1}, -4, 3);
      Value *u = t.input(d, {5, 3, 2});
      t.check(OpKind::ScatterND, {x, i, u}, {{"reduction", std::string(red)}},
              std::string("scatter_nd ") + red + " " + dt(d));
      Value *i2 = t.input(DType::I64, {2, 3}, 0, 1);
      Value *u2 = t.input(d, {2});
      t.check(OpKind::ScatterND, {x, i2, u2}, {{"reduction", std::string(red)}},
              std::string("scatter_nd full ") + red + " " + dt(d));
    }
}

namespace {

/// One node of each op that takes indices, with its indices a graph input `i` of 2 elements
/// whose first is `bad`: data x is f32[3,4] (u the updates).
struct IndexCase {
  OpKind kind;
  AttrMap attrs;
  Extents indices;
  int64_t dim; ///< The extent of the axis the first index reads.
};

const IndexCase kIndexCases[] = {
    {OpKind::Gather, {{"axis", int64_t(1)}}, {2}, 4},
    {OpKind::GatherElements, {{"axis", int64_t(0)}}, {1, 2}, 3},
    {OpKind::GatherND, {{"batch_dims", int64_t(0)}}, {1, 2}, 3},
    {OpKind::ScatterElements,
     {{"axis", int64_t(1)}, {"reduction", std::string("none")}},
     {1, 2},
     4},
    {OpKind::ScatterND, {{"reduction", std::string("add")}}, {1, 2}, 3},
};

/// The node of `c` with indices {first, 1}; `inputs` receives the values of its inputs.
Node *indexNode(Graph &g, const IndexCase &c, int64_t first, std::vector<Tensor> &inputs) {
  std::mt19937 rng(7);
  inputs = {randomTensor(DType::F32, {3, 4}, rng, -3, 3),
            Tensor::fromVector<int64_t>(DType::I64, c.indices, {first, 1})};
  std::vector<Value *> ops{g.addInput("x", TensorType(DType::F32, {3, 4})),
                           g.addInput("i", inputs[1].type())};
  if (c.kind == OpKind::ScatterElements || c.kind == OpKind::ScatterND) {
    Extents ue = c.kind == OpKind::ScatterND ? Extents{1} : c.indices;
    inputs.push_back(randomTensor(DType::F32, ue, rng, -3, 3));
    ops.push_back(g.addInput("u", inputs.back().type()));
  }
  Expected<Node *> n = g.createInferred(c.kind, ops, c.attrs, "idx");
  EXPECT_TRUE(n) << n.error().message();
  return n ? *n : nullptr;
}

} // namespace

// An index out of range is an error with the interpreter's message (naming the node, the
// value and the axis size) from the lowered kernels too: evaluated, scheduled and compiled.
TEST(LowerDataMovement, IndexOutOfRangeIsTheInterpretersError) {
  for (const IndexCase &c : kIndexCases)
    for (int64_t bad : {c.dim, -c.dim - 1, int64_t(1) << 40}) {
      Graph g;
      std::vector<Tensor> inputs;
      Node *n = indexNode(g, c, bad, inputs);
      ASSERT_TRUE(n);
      std::string what = std::string(n->opName()) + " index " + std::to_string(bad);
      Expected<std::vector<Tensor>> want = evaluateNode(*n, bindOperands(*n, inputs));
      ASSERT_FALSE(want) << what << ": the interpreter accepts it";
      std::string message = want.error().message();
      EXPECT_NE(message.find("node 'idx'"), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(bad)), std::string::npos) << message;
      for (int mode = 0; mode < 3; ++mode) {
        std::vector<Tensor> ops = bindOperands(*n, inputs);
        Expected<std::vector<Tensor>> got =
            mode == 2 ? runJit(*n, ops) : runLowered(*n, ops, mode == 1);
        ASSERT_FALSE(got) << what << " mode " << mode << ": no error";
        EXPECT_EQ(got.error().message(), message) << what << " mode " << mode;
      }
    }
}

// Indices in range, negative ones included, run as before (checked against the interpreter);
// constant indices in range make no check at all.
TEST(LowerDataMovement, IndicesInRangeRunAndConstantOnesAreNotChecked) {
  for (const IndexCase &c : kIndexCases)
    for (int64_t good : {c.dim - 1, -c.dim, int64_t(-1)}) {
      Graph g;
      std::vector<Tensor> inputs;
      Node *n = indexNode(g, c, good, inputs);
      ASSERT_TRUE(n);
      std::string what = std::string(n->opName()) + " index " + std::to_string(good);
      checkNode(*n, inputs, what);
      Expected<std::vector<kir::Kernel>> runtime =
          lowerNode(*n, "k", testenv::testLowerOptions());
      ASSERT_TRUE(runtime) << runtime.error().message();
      EXPECT_FALSE(runtime->back().checks.empty()) << what;
      // The same node with the indices a constant.
      Graph h;
      std::vector<Value *> ops{h.addInput("x", TensorType(DType::F32, {3, 4})),
                               constantValue(h, inputs[1])};
      if (inputs.size() > 2)
        ops.push_back(h.addInput("u", inputs[2].type()));
      Expected<Node *> cn = h.createInferred(c.kind, ops, c.attrs, "idx");
      ASSERT_TRUE(cn) << cn.error().message();
      std::vector<Tensor> hin{inputs[0]};
      if (inputs.size() > 2)
        hin.push_back(inputs[2]);
      checkNode(**cn, hin, what + " (constant)");
      Expected<std::vector<kir::Kernel>> ks =
          lowerNode(**cn, "k", testenv::testLowerOptions());
      ASSERT_TRUE(ks) << ks.error().message();
      for (const kir::Kernel &k : *ks) {
        EXPECT_TRUE(k.checks.empty()) << what << " (constant)\n" << kir::printKernel(k);
        for (const kir::BufferDecl &b : k.buffers)
          EXPECT_NE(b.role, kir::BufferRole::Status) << what << " (constant)";
      }
    }
}

TEST(LowerDataMovement, Range) {
  struct Case {
    DType t;
    double start, limit, delta;
  };
  for (const Case &c : {Case{DType::F32, 0.5, 7.25, 0.75}, Case{DType::I32, 10, -3, -4},
                        Case{DType::I64, -5, 20, 3}, Case{DType::F64, 1, 2, 0.125},
                        Case{DType::F16, 3, -1, -0.5}}) {
    OneNode t;
    auto scalar = [&](double v) {
      Tensor s = Tensor::zeros(c.t, {});
      switch (c.t) {
      case DType::F32: s.data<float>()[0] = static_cast<float>(v); break;
      case DType::F64: s.data<double>()[0] = v; break;
      case DType::F16: s.data<uint16_t>()[0] = floatToHalf(static_cast<float>(v)); break;
      case DType::I32: s.data<int32_t>()[0] = static_cast<int32_t>(v); break;
      default: s.data<int64_t>()[0] = static_cast<int64_t>(v); break;
      }
      return s;
    };
    t.check(OpKind::Range,
            {t.constant(scalar(c.start)), t.constant(scalar(c.limit)), t.constant(scalar(c.delta))},
            {}, "range " + dt(c.t));
  }
}

TEST(LowerDataMovement, ConstantOfShape) {
  for (DType d : {DType::F32, DType::I64, DType::Bool, DType::F16, DType::U64}) {
    OneNode t;
    Tensor v = randomTensor(d, {1}, t.rng, 1, 100);
    t.check(OpKind::ConstantOfShape, {t.constant(i64Vector({3, 5}))}, {{"value", v}},
            "constant_of_shape " + dt(d));
  }
  OneNode t;
  Tensor big = Tensor::fromVector<uint64_t>(DType::U64, {1}, {0xF000000000000001ull});
  t.check(OpKind::ConstantOfShape, {t.constant(i64Vector({2}))}, {{"value", big}},
          "constant_of_shape u64 big");
}

TEST(LowerDataMovement, OneHot) {
  for (DType it : {DType::I64, DType::I32, DType::F32})
    for (int64_t axis : {-1, 0, 1}) {
      OneNode t;
      Value *i = t.input(it, {3, 4}, -8, 8); // some out of range: all `off`
      Value *depth = t.constant(Tensor::scalar<int64_t>(DType::I64, 6));
      Value *vals = t.input(DType::F32, {2});
      t.check(OpKind::OneHot, {i, depth, vals}, {{"axis", axis}}, "one_hot " + dt(it));
    }
}

TEST(LowerDataMovement, EyeLikeTrilu) {
  for (DType d : kDTypes)
    for (int64_t k : {-2, 0, 1, 9}) {
      OneNode t;
      Value *x = t.input(DType::F32, {4, 6});
      t.check(OpKind::EyeLike, {x}, {{"k", k}, {"dtype", d}}, "eye_like " + dt(d));
      Value *m = t.input(d, {2, 4, 5});
      Value *kc = t.constant(Tensor::scalar<int64_t>(DType::I64, k));
      t.check(OpKind::Trilu, {m, kc}, {{"upper", int64_t(1)}}, "trilu upper " + dt(d));
      t.check(OpKind::Trilu, {m, kc}, {{"upper", int64_t(0)}}, "trilu lower " + dt(d));
      Value *kr = t.input(Tensor::scalar<int64_t>(DType::I64, k));
      t.check(OpKind::Trilu, {m, kr}, {{"upper", int64_t(1)}}, "trilu runtime k " + dt(d));
    }
  OneNode t;
  Value *x = t.input(DType::F32, {3, 3});
  t.check(OpKind::EyeLike, {x}, {{"k", int64_t(0)}, {"dtype", DType::F8E5M2}}, "eye_like f8");
}

TEST(LowerDataMovement, DepthSpace) {
  for (DType d : kDTypes) {
    OneNode t;
    Value *x = t.input(d, {2, 8, 3, 5});
    for (const char *mode : {"DCR", "CRD"})
      t.check(OpKind::DepthToSpace, {x}, {{"blocksize", int64_t(2)}, {"mode", std::string(mode)}},
              std::string("depth_to_space ") + mode + " " + dt(d));
    Value *y = t.input(d, {1, 3, 6, 4});
    t.check(OpKind::SpaceToDepth, {y}, {{"blocksize", int64_t(2)}}, "space_to_depth " + dt(d));
  }
}

// Every op of the table has a lowering: nothing falls back to the interpreter.
TEST(LowerDataMovement, EveryOpIsLowered) {
  Graph g;
  for (const OpInfo &op : allOps()) {
    if (op.kind == OpKind::Constant)
      continue; // weights, bound by the executable
    if (op.kind == OpKind::If)
      continue; // replaced by inline-if; one left runs in stages, each stage without it
    Node *n = g.createNode(op.kind, {}, {});
    EXPECT_TRUE(canLowerNode(*n)) << op.name;
  }
}

TEST(LowerDataMovement, LargeScheduled) {
  // Above 65536 elements kernels get parallel (and vectorized) schedules.
  OneNode t;
  Value *table = t.input(DType::F32, {1000, 96});
  Value *ids = t.input(DType::I64, {8, 90}, -1000, 999);
  Node *g = t.check(OpKind::Gather, {table, ids}, {{"axis", int64_t(0)}}, "gather embedding");
  ASSERT_TRUE(g);
  Expected<std::vector<kir::Kernel>> ks = lowerNode(*g, "g", testenv::testLowerOptions());
  ASSERT_TRUE(ks);
  EXPECT_EQ((*ks)[0].schedule.str(),
            "gpu_grid(i1, i2, i3); split(i3, 16); vectorize(i3.i); parallel(i1)");
  Value *x = t.input(DType::F32, {257, 259});
  t.check(OpKind::Pad, {x, t.constant(i64Vector({1, 2, 3, 0}))},
          {{"mode", std::string("constant")}}, "pad big");
  t.check(OpKind::Pad, {x, t.constant(i64Vector({1, 2, 3, 0}))}, {{"mode", std::string("edge")}},
          "pad edge big");
  t.check(OpKind::Concat, {x, x}, {{"axis", int64_t(1)}}, "concat big");
  t.check(OpKind::Tile, {x, t.constant(i64Vector({1, 2}))}, {}, "tile big");
  Value *n = t.input(DType::F32, {2, 128, 300});
  t.check(OpKind::Split, {n}, {{"axis", int64_t(1)}, {"sizes", ints({100, 28})}}, "split big", 2);
}
