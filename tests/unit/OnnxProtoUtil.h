// Building onnx::ModelProto messages in unit tests that use the generated protobuf classes
// (OnnxTestModel.h is the encoder for tests that write the bytes themselves).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnx.pb.h"

namespace nnc::testonnx {

/// Appends node `name` (op `op`, inputs `ins`, outputs `outs`) to `g`.
inline onnx::NodeProto *addNode(onnx::GraphProto *g, const std::string &op,
                                const std::string &name, const std::vector<std::string> &ins,
                                const std::vector<std::string> &outs) {
  onnx::NodeProto *n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto &i : ins)
    n->add_input(i);
  for (const auto &o : outs)
    n->add_output(o);
  return n;
}

/// Adds the INT attribute `name` = v to `n`.
inline void addIntAttr(onnx::NodeProto *n, const std::string &name, int64_t v) {
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

} // namespace nnc::testonnx
