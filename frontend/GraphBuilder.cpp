// The C++ graph-builder API.
#include "nnc/frontend/GraphBuilder.h"

#include "nnc/ir/Verifier.h"

namespace nnc {

GraphBuilder::GraphBuilder(std::string graphName)
    : graph_(std::make_unique<Graph>(std::move(graphName))) {}

Var GraphBuilder::input(const std::string &name, DType dtype, const Shape &shape) {
  if (!ok())
    return Var();
  for (const Dim &d : shape)
    if (d.isStatic() && d.value() < 0) {
      error_ = makeError("input '{}': negative dim in {}", name, shapeStr(shape));
      return Var();
    }
  return Var(this, graph_->addInput(name, TensorType(dtype, shape)));
}

Var GraphBuilder::constant(const Tensor &t) {
  if (!ok())
    return Var();
  if (t.isNull()) {
    error_ = makeError("constant: null tensor");
    return Var();
  }
  Node *n = graph_->createNode(OpKind::Constant, {}, {t.type()}, {{"value", t}});
  return Var(this, n->result());
}

Var GraphBuilder::constant(const Extents &extents, const std::vector<float> &values) {
  std::optional<int64_t> count = checkedNumElements(extents);
  if (!count || *count != static_cast<int64_t>(values.size())) {
    if (ok())
      error_ = makeError("constant: {} values given for shape {}", values.size(),
                         extentsStr(extents));
    return Var();
  }
  return constant(Tensor::fromVector<float>(DType::F32, extents, values));
}

Var GraphBuilder::scalar(double value, DType dtype) {
  Tensor t = Tensor::zeros(dtype, {});
  switch (dtype) {
  case DType::F32: *t.data<float>() = static_cast<float>(value); break;
  case DType::F64: *t.data<double>() = value; break;
  case DType::I32: *t.data<int32_t>() = static_cast<int32_t>(value); break;
  case DType::I64: *t.data<int64_t>() = static_cast<int64_t>(value); break;
  case DType::Bool: *t.data<bool>() = value != 0; break;
  default:
    if (ok())
      error_ = makeError("scalar: dtype {} is not supported here", dtypeName(dtype));
    return Var();
  }
  return constant(t);
}

Var GraphBuilder::i64s(const std::vector<int64_t> &values) {
  return constant(
      Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(values.size())}, values));
}

std::vector<Var> GraphBuilder::opMulti(OpKind kind, const std::vector<Var> &operands,
                                       AttrMap attrs, int numResults, const std::string &name) {
  std::vector<Var> none(static_cast<size_t>(std::max(numResults, 1)));
  if (!ok())
    return none;
  std::vector<Value *> ops;
  for (const Var &v : operands) {
    if (v.builder() && v.builder() != this) {
      error_ = makeError("{}: operand built by another GraphBuilder", opInfo(kind).name);
      return none;
    }
    ops.push_back(v.value()); // an invalid Var stands for an absent optional operand
  }
  const OpInfo &info = opInfo(kind);
  int n = static_cast<int>(ops.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands)) {
    error_ = makeError("{}: {} operands given; the op takes {} to {}", info.name, n,
                       info.minOperands,
                       info.maxOperands < 0 ? std::string("any") : std::to_string(info.maxOperands));
    return none;
  }
  for (int i = 0; i < std::min(n, info.minOperands); ++i)
    if (!ops[i]) {
      error_ = makeError("{}: required operand {} is missing", info.name, i);
      return none;
    }
  for (const auto &[attrName, value] : attrs) {
    const AttrSpec *spec = info.findAttr(attrName);
    if (!spec) {
      error_ = makeError("{}: unknown attribute '{}'", info.name, attrName);
      return none;
    }
    if (attrKind(value) != spec->kind) {
      error_ = makeError("{}: attribute '{}' must be {}, got {}", info.name, attrName,
                         attrKindName(spec->kind), attrKindName(attrKind(value)));
      return none;
    }
  }
  for (const AttrSpec &spec : info.attrs)
    if (spec.required && !attrs.count(spec.name)) {
      error_ = makeError("{}: missing required attribute '{}'", info.name, spec.name);
      return none;
    }
  Expected<Node *> node = graph_->createInferred(kind, ops, std::move(attrs), name, numResults);
  if (!node) {
    error_ = node.takeError();
    return none;
  }
  std::vector<Var> results;
  for (Value *r : (*node)->results())
    results.emplace_back(this, r);
  return results;
}

Var GraphBuilder::op(OpKind kind, const std::vector<Var> &operands, AttrMap attrs,
                     const std::string &name) {
  return opMulti(kind, operands, std::move(attrs), -1, name)[0];
}

void GraphBuilder::output(const Var &v) {
  if (!ok())
    return;
  if (!v.valid() || v.builder() != this) {
    error_ = makeError("output: not a value of this builder");
    return;
  }
  std::vector<Value *> outs = graph_->outputs();
  outs.push_back(v.value());
  graph_->setOutputs(outs);
}

Expected<std::unique_ptr<Graph>> GraphBuilder::build() {
  if (!ok())
    return error_;
  if (graph_->outputs().empty())
    return makeError("graph @{} has no outputs (call output())", graph_->name());
  NNC_TRY(verify(*graph_));
  std::unique_ptr<Graph> g = std::move(graph_);
  graph_ = std::make_unique<Graph>(g->name());
  return g;
}

// ---- Free functions ---------------------------------------------------------------------------

namespace {
GraphBuilder *builderOf(std::initializer_list<const Var *> vs) {
  for (const Var *v : vs)
    if (v->builder())
      return v->builder();
  return nullptr;
}

Var apply(OpKind kind, std::vector<Var> operands, AttrMap attrs = {}) {
  for (const Var &v : operands)
    if (v.builder())
      return v.builder()->op(kind, operands, std::move(attrs));
  return Var();
}

Var scalarLike(const Var &like, double value) {
  return like.builder() ? like.builder()->scalar(value, like.dtype()) : Var();
}
} // namespace

Var operator+(const Var &a, const Var &b) { return apply(OpKind::Add, {a, b}); }
Var operator-(const Var &a, const Var &b) { return apply(OpKind::Sub, {a, b}); }
Var operator*(const Var &a, const Var &b) { return apply(OpKind::Mul, {a, b}); }
Var operator/(const Var &a, const Var &b) { return apply(OpKind::Div, {a, b}); }
Var operator-(const Var &a) { return apply(OpKind::Neg, {a}); }
Var operator+(const Var &a, double b) { return a + scalarLike(a, b); }
Var operator*(const Var &a, double b) { return a * scalarLike(a, b); }

Var matmul(const Var &a, const Var &b) { return apply(OpKind::MatMul, {a, b}); }
Var relu(const Var &x) { return apply(OpKind::Max, {x, scalarLike(x, 0.0)}); }
Var sigmoid(const Var &x) { return apply(OpKind::Sigmoid, {x}); }
Var tanh(const Var &x) { return apply(OpKind::Tanh, {x}); }
Var exp(const Var &x) { return apply(OpKind::Exp, {x}); }
Var sqrt(const Var &x) { return apply(OpKind::Sqrt, {x}); }
Var softmax(const Var &x, int64_t axis) { return apply(OpKind::Softmax, {x}, {{"axis", axis}}); }
Var cast(const Var &x, DType to) { return apply(OpKind::Cast, {x}, {{"to", to}}); }

Var reshape(const Var &x, const std::vector<int64_t> &shape) {
  GraphBuilder *b = builderOf({&x});
  return b ? b->op(OpKind::Reshape, {x, b->i64s(shape)}) : Var();
}

Var transpose(const Var &x, const std::vector<int64_t> &perm) {
  return apply(OpKind::Transpose, {x}, {{"perm", perm}});
}

Var concat(const std::vector<Var> &xs, int64_t axis) {
  return apply(OpKind::Concat, xs, {{"axis", axis}});
}

Var reduceMean(const Var &x, const std::vector<int64_t> &axes, bool keepdims) {
  return apply(OpKind::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t(keepdims)}});
}

Var reduceSum(const Var &x, const std::vector<int64_t> &axes, bool keepdims) {
  return apply(OpKind::ReduceSum, {x}, {{"axes", axes}, {"keepdims", int64_t(keepdims)}});
}

Var conv2d(const Var &x, const Var &w, const Var &bias, int64_t stride, int64_t pad,
           int64_t group) {
  std::vector<Var> ops = {x, w};
  if (bias.valid())
    ops.push_back(bias);
  return apply(OpKind::Conv, ops,
               {{"strides", std::vector<int64_t>{stride, stride}},
                {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                {"dilations", std::vector<int64_t>{1, 1}},
                {"group", group}});
}

Var maxPool2d(const Var &x, int64_t kernel, int64_t stride) {
  return apply(OpKind::MaxPool, {x},
               {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
                {"strides", std::vector<int64_t>{stride, stride}},
                {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                {"dilations", std::vector<int64_t>{1, 1}},
                {"ceil_mode", int64_t(0)}});
}

Var layerNorm(const Var &x, const Var &scale, const Var &bias, int64_t axis, double epsilon) {
  return apply(OpKind::LayerNorm, {x, scale, bias},
               {{"axis", axis}, {"epsilon", epsilon}, {"stash_type", DType::F32}});
}

} // namespace nnc
