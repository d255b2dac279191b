// The public C++ API for writing models: GraphBuilder and Var.
//
//   nnc::GraphBuilder b("mlp");
//   nnc::Var x = b.input("x", nnc::DType::F32, {nnc::Dim::symbol("N"), 784});
//   nnc::Var y = nnc::relu(nnc::matmul(x, b.constant(w)) + b.constant(bias));
//   b.output(y);
//   nnc::Expected<std::unique_ptr<nnc::Graph>> g = b.build();
//
// Shape rules run as each op is added. The first error (say, operands whose shapes do not
// broadcast) is kept, names the op, and is returned by build(); ops on values built after
// an error are skipped, so model code needs no error check per line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nnc/ir/Graph.h"
#include "nnc/ir/Tensor.h"

namespace nnc {

class GraphBuilder;

/// A value under construction. Cheap to copy. A Var made after the builder failed is
/// invalid (value() is null) and every op on it yields another invalid Var.
class Var {
public:
  Var() = default;
  Var(GraphBuilder *b, Value *v) : builder_(b), value_(v) {}
  bool valid() const { return value_ != nullptr; }
  Value *value() const { return value_; }
  GraphBuilder *builder() const { return builder_; }
  /// The value's type; an f32 scalar type for an invalid Var.
  TensorType type() const { return value_ ? value_->type() : TensorType(DType::F32, {}); }
  DType dtype() const { return type().dtype; }
  int64_t rank() const { return type().rank(); }

private:
  GraphBuilder *builder_ = nullptr;
  Value *value_ = nullptr;
};

class GraphBuilder {
public:
  explicit GraphBuilder(std::string graphName = "main");

  /// A graph input. Dims are constants or symbols: {Dim::symbol("N"), 784}.
  Var input(const std::string &name, DType dtype, const Shape &shape);
  /// A constant holding `t`.
  Var constant(const Tensor &t);
  /// A constant of dtype f32 with the given extents and values (row-major).
  Var constant(const Extents &extents, const std::vector<float> &values);
  /// A rank-0 constant of `dtype` (value converted).
  Var scalar(double value, DType dtype = DType::F32);
  /// A 1-D i64 constant (shapes, axes).
  Var i64s(const std::vector<int64_t> &values);

  /// Any IR op with one result; attributes as in Ops.def. `name` names the node.
  Var op(OpKind kind, const std::vector<Var> &operands, AttrMap attrs = {},
         const std::string &name = "");
  /// Any IR op with several results.
  std::vector<Var> opMulti(OpKind kind, const std::vector<Var> &operands, AttrMap attrs,
                           int numResults, const std::string &name = "");

  /// Marks graph outputs, in order.
  void output(const Var &v);

  /// True while no op has failed.
  bool ok() const { return !error_; }
  /// The first error, if any.
  const Error &error() const { return error_; }

  /// Verifies and hands over the graph; fails with the first error met while building,
  /// or when there is no output. The builder is empty afterwards.
  Expected<std::unique_ptr<Graph>> build();

private:
  std::unique_ptr<Graph> graph_;
  Error error_ = Error::success();
};

// ---- Operators and named ops (each adds one node through the operands' builder) --------------
Var operator+(const Var &a, const Var &b);
Var operator-(const Var &a, const Var &b);
Var operator*(const Var &a, const Var &b);
Var operator/(const Var &a, const Var &b);
Var operator-(const Var &a);
Var operator+(const Var &a, double b);
Var operator*(const Var &a, double b);

Var matmul(const Var &a, const Var &b);
Var relu(const Var &x);
Var sigmoid(const Var &x);
Var tanh(const Var &x);
Var exp(const Var &x);
Var sqrt(const Var &x);
Var softmax(const Var &x, int64_t axis = -1);
Var cast(const Var &x, DType to);
Var reshape(const Var &x, const std::vector<int64_t> &shape);
Var transpose(const Var &x, const std::vector<int64_t> &perm);
Var concat(const std::vector<Var> &xs, int64_t axis);
Var reduceMean(const Var &x, const std::vector<int64_t> &axes, bool keepdims = true);
Var reduceSum(const Var &x, const std::vector<int64_t> &axes, bool keepdims = true);
/// 2-D convolution, NCHW, weights [M, C/group, kH, kW], symmetric padding.
Var conv2d(const Var &x, const Var &w, const Var &bias, int64_t stride = 1, int64_t pad = 0,
           int64_t group = 1);
Var maxPool2d(const Var &x, int64_t kernel, int64_t stride);
Var layerNorm(const Var &x, const Var &scale, const Var &bias, int64_t axis = -1,
              double epsilon = 1e-5);

} // namespace nnc
