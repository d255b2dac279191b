// A minimal protobuf encoder for ONNX ModelProto, so that unit tests can write small models
// (one node, a few initializers) and import them without the onnx Python package.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "nnc/frontend/OnnxImporter.h"

namespace nnc::testonnx {

/// Just enough protobuf wire format for ModelProto.
struct Pb {
  std::string bytes;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<char>(v));
  }
  Pb &i(int field, int64_t v) {
    varint(static_cast<uint64_t>(field) << 3);
    varint(static_cast<uint64_t>(v));
    return *this;
  }
  Pb &s(int field, const std::string &v) {
    varint((static_cast<uint64_t>(field) << 3) | 2);
    varint(v.size());
    bytes += v;
    return *this;
  }
  Pb &m(int field, const Pb &v) { return s(field, v.bytes); }
  Pb &f(int field, float v) {
    varint((static_cast<uint64_t>(field) << 3) | 5);
    char b[4];
    std::memcpy(b, &v, 4);
    bytes.append(b, 4);
    return *this;
  }
};

inline Pb attrInt(const std::string &name, int64_t v) {
  return Pb().s(1, name).i(20, 2).i(3, v);
}
inline Pb attrFloat(const std::string &name, float v) {
  return Pb().s(1, name).i(20, 1).f(2, v);
}
inline Pb attrString(const std::string &name, const std::string &v) {
  return Pb().s(1, name).i(20, 3).s(4, v);
}
inline Pb attrFloats(const std::string &name, const std::vector<float> &v) {
  Pb a = Pb().s(1, name).i(20, 6);
  for (float x : v)
    a.f(7, x);
  return a;
}
inline Pb attrStrings(const std::string &name, const std::vector<std::string> &v) {
  Pb a = Pb().s(1, name).i(20, 8);
  for (const std::string &x : v)
    a.s(9, x);
  return a;
}

inline Pb node(const std::string &op, const std::vector<std::string> &ins,
               const std::vector<std::string> &outs, const std::vector<Pb> &attrs = {}) {
  Pb n;
  for (const auto &x : ins)
    n.s(1, x);
  for (const auto &x : outs)
    n.s(2, x);
  n.s(4, op);
  for (const Pb &a : attrs)
    n.m(5, a);
  return n;
}

/// A graph input (or output) typed like `t`.
inline Pb valueInfo(const std::string &name, const Tensor &t) {
  Pb shape;
  for (int64_t d : t.extents())
    shape.m(1, Pb().i(1, d));
  Pb tensorType = Pb().i(1, dtypeToOnnx(t.dtype())).m(2, shape);
  return Pb().s(1, name).m(2, Pb().m(1, tensorType));
}

/// A TensorProto holding `t` as raw data.
inline Pb initializer(const std::string &name, const Tensor &t) {
  Pb p;
  for (int64_t d : t.extents())
    p.i(1, d);
  p.i(2, dtypeToOnnx(t.dtype()));
  p.s(8, name);
  p.s(9, std::string(static_cast<const char *>(t.rawData()), t.byteSize()));
  return p;
}

/// A model of `nodes` with graph inputs `inputs` (typed like the tensors), initializers
/// `inits` and outputs `outputs`, written to a temporary file and imported.
inline Expected<std::unique_ptr<Graph>>
importModel(int64_t opset, const std::vector<Pb> &nodes,
            const std::vector<std::pair<std::string, Tensor>> &inputs,
            const std::vector<std::pair<std::string, Tensor>> &inits,
            const std::vector<std::string> &outputs) {
  Pb graph;
  for (const Pb &n : nodes)
    graph.m(1, n);
  graph.s(2, "g");
  for (const auto &[name, t] : inits)
    graph.m(5, initializer(name, t));
  for (const auto &[name, t] : inputs)
    graph.m(11, valueInfo(name, t));
  for (const auto &name : outputs)
    graph.m(12, Pb().s(1, name));
  Pb model;
  model.i(1, 8).m(8, Pb().s(1, "").i(2, opset)).m(7, graph);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("nnc_test_model_" + std::to_string(::getpid()) + ".onnx"))
                         .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << model.bytes;
  }
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path);
  std::filesystem::remove(path);
  return g;
}

} // namespace nnc::testonnx
