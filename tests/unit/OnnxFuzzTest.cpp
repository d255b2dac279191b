// A structure-aware fuzzer: mutated tier-1 ONNX models must import, optimize and run or fail
// with an Error, never crash, abort, hang or allocate without bound.
//
// Each case picks a tier-1 node test, applies seeded random mutations to the model's bytes or
// to its protobuf (dims, inputs, attributes, initializers, opsets) or to its test inputs, then
// imports it and, when that succeeds, optimizes and interprets it. The committed test runs a
// bounded budget in-process. For hunting bugs, run with NNC_FUZZ_FORK=1: every case then runs
// in a forked child with a time and memory limit, and crashes are listed with their mutation.
//   NNC_FUZZ_CASES=N   number of cases (default 3000)
//   NNC_FUZZ_SEED=S    base seed (default 1)
//   NNC_FUZZ_ONLY=I    run only case I (prints its mutation)
//   NNC_FUZZ_FORK=1    isolate cases in forked children
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestTarget.h"
#include "nnc/frontend/OnnxImporter.h"
#include "nnc/ir/Verifier.h"
#include "nnc/passes/PassManager.h"
#include "nnc/runtime/Interpreter.h"
#include "onnx.pb.h"

using namespace nnc;
namespace fs = std::filesystem;

namespace {

// Fuzzed models may legitimately ask for tensors of gigabytes; keep the test's footprint small
// by lowering the allocation limit (before anything reads it) unless the caller set one.
[[maybe_unused]] const bool kLimitSet = [] {
  setenv("NNC_MAX_TENSOR_BYTES", "268435456", /*overwrite=*/0);
  return true;
}();

int64_t envInt(const char *name, int64_t dflt) {
  const char *s = std::getenv(name);
  return s && *s ? std::strtoll(s, nullptr, 10) : dflt;
}

struct Seed {
  std::string name;  ///< Test name.
  std::string dir;   ///< Test folder.
  std::string bytes; ///< model.onnx.
  onnx::ModelProto model;
  std::vector<std::string> inputNames;
  std::vector<Tensor> inputs; ///< test_data_set_0 inputs, in order.
};

/// Loads every tier-1 model (and its first data set's inputs) once.
const std::vector<Seed> &seeds() {
  static std::vector<Seed> all = [] {
    std::vector<Seed> v;
    fs::path node = fs::path(NNC_SHARED_DIR) / "onnx-tests" / "node";
    std::ifstream list(fs::path(NNC_SHARED_DIR) / "onnx-tests" / "tier1.txt");
    for (std::string line; std::getline(list, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
        line.pop_back();
      if (line.empty() || line[0] == '#')
        continue;
      Seed s;
      s.name = line;
      s.dir = (node / line).string();
      std::ifstream f(node / line / "model.onnx", std::ios::binary);
      if (!f)
        continue;
      std::ostringstream ss;
      ss << f.rdbuf();
      s.bytes = ss.str();
      if (!s.model.ParseFromString(s.bytes))
        continue;
      Expected<std::vector<std::string>> names =
          onnxGraphInputNames((node / line / "model.onnx").string());
      if (names)
        s.inputNames = *names;
      for (size_t k = 0;; ++k) {
        fs::path p = node / line / "test_data_set_0" / fmt::format("input_{}.pb", k);
        if (!fs::exists(p))
          break;
        Expected<Tensor> t = readTensorProtoFile(p.string());
        if (!t)
          break;
        s.inputs.push_back(*t);
      }
      v.push_back(std::move(s));
    }
    return v;
  }();
  return all;
}

/// Values that break naive code: boundaries, negatives, huge.
int64_t nastyInt(std::mt19937_64 &rng) {
  static const int64_t vals[] = {0,          -1,          1,          2,         -2,
                                 3,          -3,          7,          -100,      100,
                                 65536,      1LL << 31,   -(1LL << 31), 1LL << 40, -(1LL << 40),
                                 INT64_MAX,  INT64_MIN,   INT64_MAX - 1, INT64_MIN + 1,
                                 1000000007, 1LL << 62};
  return vals[rng() % (sizeof vals / sizeof vals[0])];
}

double nastyFloat(std::mt19937_64 &rng) {
  static const double vals[] = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                0.5,
                                1e-30,
                                1e30,
                                -1e30,
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                1e300,
                                3.5};
  return vals[rng() % (sizeof vals / sizeof vals[0])];
}

template <typename T> size_t pick(std::mt19937_64 &rng, const T &c) {
  return static_cast<size_t>(rng() % c.size());
}

/// One case: mutated model bytes and inputs, plus a description of what was done.
struct Case {
  const Seed *seed = nullptr;
  std::string bytes;
  std::vector<Tensor> inputs;
  bool passKnown = true;
  /// Inputs are random data of random extents for symbolic input dims (test data unused).
  bool randomShapes = false;
  std::string what;
};

void mutateDim(onnx::TensorShapeProto_Dimension *d, std::mt19937_64 &rng, std::string &what) {
  switch (rng() % 5) {
  case 0: d->set_dim_value(0); what += " dim=0"; break;
  case 1: d->set_dim_value(-1); what += " dim=-1"; break;
  case 2: d->set_dim_value(int64_t(1) << 40); what += " dim=2^40"; break;
  case 3: d->set_dim_param("N"); what += " dim=N"; break;
  default: d->clear_value(); what += " dim=unknown"; break;
  }
}

onnx::NodeProto *randomNode(onnx::GraphProto *g, std::mt19937_64 &rng) {
  if (g->node_size() == 0)
    return nullptr;
  return g->mutable_node(static_cast<int>(rng() % g->node_size()));
}

/// Applies one protobuf-level mutation; returns a description.
std::string mutateProto(onnx::ModelProto &m, std::mt19937_64 &rng,
                        const std::vector<std::string> &opTypes) {
  onnx::GraphProto *g = m.mutable_graph();
  std::string what;
  switch (rng() % 16) {
  case 0: { // a dim of a graph input or output
    auto *vis = (rng() % 3 == 0 || g->input_size() == 0) ? g->mutable_output() : g->mutable_input();
    if (vis->empty())
      return "noop";
    auto *vi = vis->Mutable(static_cast<int>(rng() % vis->size()));
    auto *shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    what = fmt::format("value '{}'", vi->name());
    if (shape->dim_size() == 0 || rng() % 6 == 0) {
      if (rng() % 2) {
        vi->mutable_type()->mutable_tensor_type()->clear_shape();
        return what + " shape cleared";
      }
      mutateDim(shape->add_dim(), rng, what);
      return what + " (added)";
    }
    mutateDim(shape->mutable_dim(static_cast<int>(rng() % shape->dim_size())), rng, what);
    return what;
  }
  case 1: { // drop / duplicate / blank a node input or output
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n)
      return "noop";
    what = fmt::format("node '{}' ({})", n->name(), n->op_type());
    auto *list = rng() % 4 == 0 ? n->mutable_output() : n->mutable_input();
    std::string lname = list == n->mutable_output() ? "output" : "input";
    switch (rng() % 4) {
    case 0:
      if (!list->empty()) {
        list->RemoveLast();
        return what + " drop last " + lname;
      }
      return "noop";
    case 1:
      if (!list->empty()) {
        *list->Add() = list->Get(static_cast<int>(rng() % list->size()));
        return what + " duplicate " + lname;
      }
      return "noop";
    case 2:
      if (!list->empty()) {
        int i = static_cast<int>(rng() % list->size());
        list->Mutable(i)->clear();
        return what + fmt::format(" blank {} {}", lname, i);
      }
      return "noop";
    default:
      if (list->size() >= 2) {
        list->SwapElements(0, list->size() - 1);
        return what + " swap first/last " + lname;
      }
      return "noop";
    }
  }
  case 2: { // rename a node input to an undefined name
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n || n->input_size() == 0)
      return "noop";
    int i = static_cast<int>(rng() % n->input_size());
    n->set_input(i, "undefined_fuzz_name");
    return fmt::format("node '{}' ({}) input {} -> undefined", n->name(), n->op_type(), i);
  }
  case 3:
  case 4:
  case 5: { // attribute values
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n || n->attribute_size() == 0)
      return "noop";
    auto *a = n->mutable_attribute(static_cast<int>(rng() % n->attribute_size()));
    what = fmt::format("node '{}' ({}) attr '{}'", n->name(), n->op_type(), a->name());
    switch (a->type()) {
    case onnx::AttributeProto::INT: {
      int64_t v = rng() % 3 == 0 ? a->i() + (rng() % 2 ? 1 : -1) * int64_t(rng() % 8)
                                 : nastyInt(rng);
      a->set_i(v);
      return what + fmt::format(" i={}", v);
    }
    case onnx::AttributeProto::FLOAT: {
      double v = nastyFloat(rng);
      a->set_f(static_cast<float>(v));
      return what + fmt::format(" f={}", v);
    }
    case onnx::AttributeProto::INTS: {
      switch (rng() % 4) {
      case 0: a->clear_ints(); return what + " ints=[]";
      case 1: a->add_ints(nastyInt(rng)); return what + " ints+=nasty";
      case 2:
        if (a->ints_size() > 0) {
          int i = static_cast<int>(rng() % a->ints_size());
          int64_t v = nastyInt(rng);
          a->set_ints(i, v);
          return what + fmt::format(" ints[{}]={}", i, v);
        }
        return "noop";
      default:
        if (a->ints_size() > 0) {
          a->mutable_ints()->RemoveLast();
          return what + " ints drop last";
        }
        return "noop";
      }
    }
    case onnx::AttributeProto::FLOATS:
      if (rng() % 2) {
        a->clear_floats();
        return what + " floats=[]";
      }
      a->add_floats(static_cast<float>(nastyFloat(rng)));
      return what + " floats+=nasty";
    case onnx::AttributeProto::STRING: {
      static const char *strs[] = {"", "garbage", "NOTSET", "SAME_UPPER", "VALID", "constant",
                                   "edge", "reflect", "wrap", "linear", "cubic", "nearest"};
      std::string s = strs[rng() % (sizeof strs / sizeof strs[0])];
      a->set_s(s);
      return what + " s='" + s + "'";
    }
    case onnx::AttributeProto::TENSOR:
      if (rng() % 2) {
        a->mutable_t()->set_data_type(static_cast<int>(rng() % 26));
        return what + fmt::format(" t.data_type={}", a->t().data_type());
      }
      a->mutable_t()->add_dims(static_cast<int64_t>(rng() % 3));
      return what + " t.dims+=";
    default: a->clear_type(); return what + " type cleared";
    }
  }
  case 6: { // change an attribute's type
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n || n->attribute_size() == 0)
      return "noop";
    auto *a = n->mutable_attribute(static_cast<int>(rng() % n->attribute_size()));
    what = fmt::format("node '{}' ({}) attr '{}'", n->name(), n->op_type(), a->name());
    switch (rng() % 5) {
    case 0: a->set_type(onnx::AttributeProto::INT); a->set_i(nastyInt(rng)); return what + " ->INT";
    case 1: a->set_type(onnx::AttributeProto::FLOAT); a->set_f(2.5f); return what + " ->FLOAT";
    case 2: a->set_type(onnx::AttributeProto::STRING); a->set_s("x"); return what + " ->STRING";
    case 3:
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(nastyInt(rng));
      return what + " ->INTS";
    default:
      a->set_type(onnx::AttributeProto::FLOATS);
      a->add_floats(1.5f);
      return what + " ->FLOATS";
    }
  }
  case 7: { // initializer dtype
    if (g->initializer_size() == 0)
      return "noop";
    auto *t = g->mutable_initializer(static_cast<int>(rng() % g->initializer_size()));
    t->set_data_type(static_cast<int>(rng() % 26));
    return fmt::format("initializer '{}' data_type={}", t->name(), t->data_type());
  }
  case 8: { // initializer data / dims
    if (g->initializer_size() == 0)
      return "noop";
    auto *t = g->mutable_initializer(static_cast<int>(rng() % g->initializer_size()));
    what = fmt::format("initializer '{}'", t->name());
    switch (rng() % 4) {
    case 0:
      if (!t->raw_data().empty()) {
        t->mutable_raw_data()->resize(rng() % t->raw_data().size());
        return what + " raw_data shortened";
      }
      t->clear_float_data();
      t->clear_int64_data();
      t->clear_int32_data();
      return what + " typed data cleared";
    case 1:
      if (t->dims_size() > 0) {
        int64_t v = nastyInt(rng);
        t->set_dims(static_cast<int>(rng() % t->dims_size()), v);
        return what + fmt::format(" dim={}", v);
      }
      t->add_dims(2);
      return what + " dims+=2";
    case 2:
      if (t->data_type() == onnx::TensorProto::INT64 && t->raw_data().size() >= 8) {
        size_t n = t->raw_data().size() / 8;
        size_t i = rng() % n;
        int64_t v = nastyInt(rng);
        std::memcpy(t->mutable_raw_data()->data() + i * 8, &v, 8);
        return what + fmt::format(" int64[{}]={}", i, v);
      }
      if (t->int64_data_size() > 0) {
        int i = static_cast<int>(rng() % t->int64_data_size());
        int64_t v = nastyInt(rng);
        t->set_int64_data(i, v);
        return what + fmt::format(" int64[{}]={}", i, v);
      }
      return "noop";
    default:
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      return what + " data_location=EXTERNAL";
    }
  }
  case 9: { // opset versions
    if (m.opset_import_size() == 0)
      return "noop";
    auto *o = m.mutable_opset_import(static_cast<int>(rng() % m.opset_import_size()));
    static const int64_t vs[] = {0, 1, 6, 7, 9, 11, 13, 999, -1};
    int64_t v = vs[rng() % (sizeof vs / sizeof vs[0])];
    o->set_version(v);
    return fmt::format("opset '{}' = {}", o->domain(), v);
  }
  case 10: { // graph inputs / outputs
    switch (rng() % 4) {
    case 0:
      if (g->input_size() > 0) {
        g->mutable_input()->RemoveLast();
        return "drop last graph input";
      }
      return "noop";
    case 1:
      if (g->output_size() > 0) {
        g->mutable_output()->RemoveLast();
        return "drop last graph output";
      }
      return "noop";
    case 2:
      if (g->input_size() > 0) {
        *g->add_input() = g->input(0);
        return "duplicate graph input 0";
      }
      return "noop";
    default:
      if (g->output_size() > 0) {
        *g->add_output() = g->output(0);
        return "duplicate graph output 0";
      }
      return "noop";
    }
  }
  case 11: { // graph input elem type
    if (g->input_size() == 0)
      return "noop";
    auto *vi = g->mutable_input(static_cast<int>(rng() % g->input_size()));
    int t = static_cast<int>(rng() % 26);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(t);
    return fmt::format("graph input '{}' elem_type={}", vi->name(), t);
  }
  case 12: { // change op type (attributes kept or dropped)
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n || opTypes.empty())
      return "noop";
    std::string old = n->op_type();
    n->set_op_type(opTypes[pick(rng, opTypes)]);
    bool drop = rng() % 2;
    if (drop)
      n->clear_attribute();
    return fmt::format("node '{}' op {} -> {}{}", n->name(), old, n->op_type(),
                       drop ? " (attrs dropped)" : "");
  }
  case 13: { // remove an attribute
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n || n->attribute_size() == 0)
      return "noop";
    int i = static_cast<int>(rng() % n->attribute_size());
    std::string name = n->attribute(i).name();
    n->mutable_attribute()->DeleteSubrange(i, 1);
    return fmt::format("node '{}' ({}) attr '{}' removed", n->name(), n->op_type(), name);
  }
  case 14: { // node domain
    onnx::NodeProto *n = randomNode(g, rng);
    if (!n)
      return "noop";
    n->set_domain(rng() % 2 ? "com.microsoft" : "ai.onnx");
    return fmt::format("node '{}' domain={}", n->name(), n->domain());
  }
  default: { // add a graph input's value as a second output of a node / reorder nodes
    if (g->node_size() >= 2) {
      g->mutable_node()->SwapElements(0, g->node_size() - 1);
      return "swap first/last node";
    }
    return "noop";
  }
  }
}

/// Applies one byte-level mutation.
std::string mutateBytes(std::string &b, std::mt19937_64 &rng) {
  if (b.empty())
    return "noop";
  switch (rng() % 5) {
  case 0: {
    int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k)
      b[rng() % b.size()] ^= static_cast<char>(1u << (rng() % 8));
    return fmt::format("flip {} bits", n);
  }
  case 1: {
    size_t at = rng() % (b.size() + 1);
    size_t n = 1 + rng() % 8;
    std::string ins;
    for (size_t k = 0; k < n; ++k)
      ins.push_back(static_cast<char>(rng()));
    b.insert(at, ins);
    return fmt::format("insert {} bytes at {}", n, at);
  }
  case 2: {
    size_t at = rng() % b.size();
    size_t n = 1 + rng() % 8;
    b.erase(at, n);
    return fmt::format("delete {} bytes at {}", n, at);
  }
  case 3: {
    size_t at = rng() % b.size();
    b.resize(at);
    return fmt::format("truncate at {}", at);
  }
  default: {
    static const unsigned char vals[] = {0x00, 0xff, 0x7f, 0x80, 0x01};
    size_t at = rng() % b.size();
    b[at] = static_cast<char>(vals[rng() % 5]);
    return fmt::format("set byte {}", at);
  }
  }
}

/// Perturbs one test input's values (indices, shapes and axes read from inputs matter).
std::string mutateInput(std::vector<Tensor> &inputs, std::mt19937_64 &rng) {
  if (inputs.empty())
    return "noop";
  size_t k = rng() % inputs.size();
  Tensor t = inputs[k].clone();
  if (t.numElements() == 0 || isStorageOnly(t.dtype()) || t.dtype() == DType::Bool)
    return "noop";
  int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(t.numElements()));
  std::string what;
  switch (t.dtype()) {
  case DType::I64: {
    int64_t v = nastyInt(rng);
    t.data<int64_t>()[i] = v;
    what = fmt::format("{}", v);
    break;
  }
  case DType::I32: {
    int32_t v = static_cast<int32_t>(nastyInt(rng));
    t.data<int32_t>()[i] = v;
    what = fmt::format("{}", v);
    break;
  }
  case DType::F32: {
    float v = static_cast<float>(nastyFloat(rng));
    t.data<float>()[i] = v;
    what = fmt::format("{}", v);
    break;
  }
  case DType::F64: {
    double v = nastyFloat(rng);
    t.data<double>()[i] = v;
    what = fmt::format("{}", v);
    break;
  }
  default: return "noop";
  }
  inputs[k] = t;
  return fmt::format("input {} [{}] = {}", k, i, what);
}

std::vector<std::string> allOpTypes() {
  std::set<std::string> ops;
  for (const Seed &s : seeds())
    for (const auto &n : s.model.graph().node())
      ops.insert(n.op_type());
  return {ops.begin(), ops.end()};
}

Case makeCase(uint64_t index, uint64_t baseSeed) {
  static const std::vector<std::string> opTypes = allOpTypes();
  std::mt19937_64 rng(baseSeed * 0x9E3779B97F4A7C15ULL + index);
  const std::vector<Seed> &all = seeds();
  Case c;
  c.seed = &all[rng() % all.size()];
  c.inputs = c.seed->inputs;
  c.passKnown = rng() % 4 != 0;
  onnx::ModelProto m = c.seed->model;
  int rounds = 1 + static_cast<int>(rng() % 3);
  bool bytesMode = rng() % 5 == 0;
  if (!bytesMode && rng() % 4 == 0) {
    // Every graph input dim becomes its own symbol; the data gets random extents.
    c.randomShapes = true;
    c.passKnown = false;
    int k = 0;
    for (auto &vi : *m.mutable_graph()->mutable_input())
      for (auto &d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
        d.set_dim_param(fmt::format("s{}", k++));
    rounds = static_cast<int>(rng() % 2);
  }
  std::vector<std::string> whats;
  if (bytesMode) {
    c.bytes = c.seed->bytes;
    for (int r = 0; r < rounds; ++r)
      whats.push_back(mutateBytes(c.bytes, rng));
  } else {
    for (int r = 0; r < rounds; ++r) {
      if (rng() % 4 == 0)
        whats.push_back(mutateInput(c.inputs, rng));
      else
        whats.push_back(mutateProto(m, rng, opTypes));
    }
    c.bytes = m.SerializeAsString();
  }
  c.what = c.seed->name + ":";
  for (const std::string &w : whats)
    c.what += " [" + w + "]";
  if (c.randomShapes)
    c.what += " (symbolic input dims, random extents)";
  else if (!c.passKnown)
    c.what += " (inputs not known at import)";
  return c;
}

/// Random data for an input declared as `type` (symbols bound consistently to small extents).
/// Returns a null tensor when the input would be too large to bother with.
Tensor randomInput(const TensorType &type, std::map<std::string, int64_t> &symbols,
                   std::mt19937_64 &rng, bool wide) {
  Extents e;
  for (const Dim &d : type.shape) {
    if (d.isStatic()) {
      e.push_back(d.value());
    } else {
      auto it = symbols.find(d.symbolName());
      if (it == symbols.end())
        it = symbols
                 .emplace(d.symbolName(), wide ? static_cast<int64_t>(rng() % 5)
                                               : 1 + static_cast<int64_t>(rng() % 3))
                 .first;
      e.push_back(it->second);
    }
  }
  std::optional<int64_t> n = checkedNumElements(e);
  if (!n || *n * static_cast<int64_t>(std::max<size_t>(1, dtypeSize(type.dtype))) > (4 << 20))
    return Tensor();
  Expected<Tensor> t = Tensor::create(type.dtype, e);
  if (!t)
    return Tensor();
  if (!isStorageOnly(type.dtype) && type.dtype != DType::Bool) {
    for (int64_t i = 0; i < t->numElements(); ++i) {
      int v = static_cast<int>(rng() % 7) - 3;
      switch (type.dtype) {
      case DType::F32: t->data<float>()[i] = static_cast<float>(v) * 0.5f; break;
      case DType::F64: t->data<double>()[i] = v * 0.5; break;
      case DType::I64: t->data<int64_t>()[i] = v; break;
      case DType::I32: t->data<int32_t>()[i] = v; break;
      default: break;
      }
    }
  }
  return *t;
}

/// How far a case got.
enum Stage { ImportFailed, OptimizeFailed, RunFailed, RanOk, SkippedLarge, NumStages };
const char *const kStageNames[] = {"import error", "optimize error", "run error", "ran",
                                   "too large to run"};

/// Runs one case; returns "" when it succeeded or failed cleanly, else what went wrong
/// (an empty error message counts as wrong: errors must say something).
std::string runCaseUnguarded(const Case &c, const std::string &path, Stage &stage);

/// runCase, with an escaping C++ exception (say std::length_error from a huge vector) counted
/// as a failure: nnc must turn bad input into an Error.
std::string runCase(const Case &c, const std::string &path, Stage &stage) {
  try {
    return runCaseUnguarded(c, path, stage);
  } catch (const std::exception &e) {
    return std::string("C++ exception: ") + e.what();
  }
}

std::string runCaseUnguarded(const Case &c, const std::string &path, Stage &stage) {
  stage = ImportFailed;
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
  }
  ImportOptions opts;
  if (c.passKnown)
    for (size_t k = 0; k < c.inputs.size() && k < c.seed->inputNames.size(); ++k)
      opts.knownInputs[c.seed->inputNames[k]] = c.inputs[k];
  opts.evaluate = [](const Node &n, const std::vector<Tensor> &ops) {
    return evaluateNode(n, ops);
  };
  Expected<std::unique_ptr<Graph>> g = importOnnxFile(path, opts);
  if (!g)
    return g.error().message().empty() ? "import failed with an empty message" : "";
  stage = OptimizeFailed;
  PassContext ctx;
  ctx.cpu = testenv::testCpu();
  ctx.evaluate = opts.evaluate;
  if (Error e = PassPipeline::defaultPipeline().run(**g, ctx))
    return e.message().empty() ? "optimize failed with an empty message" : "";
  if (Error e = verify(**g))
    return "optimized graph does not verify: " + e.message();
  // Inputs: the test data where it still fits the declared type, else random data.
  std::mt19937_64 rng(std::hash<std::string>{}(c.what) ^ c.bytes.size());
  std::map<std::string, int64_t> symbols;
  std::vector<Tensor> inputs;
  const std::vector<Value *> &gin = (*g)->inputs();
  for (size_t k = 0; k < gin.size(); ++k) {
    Tensor t;
    for (size_t j = 0; !c.randomShapes && j < c.seed->inputNames.size() && j < c.inputs.size();
         ++j)
      if (c.seed->inputNames[j] == gin[k]->name()) {
        std::map<std::string, int64_t> trial = symbols;
        if (!checkAgainstType(c.inputs[j], gin[k]->type(), trial, "x")) {
          t = c.inputs[j];
          symbols = trial;
        }
      }
    if (t.isNull())
      t = randomInput(gin[k]->type(), symbols, rng, c.randomShapes);
    if (t.isNull()) {
      stage = SkippedLarge;
      return "";
    }
    inputs.push_back(t);
  }
  stage = RunFailed;
  Expected<std::vector<Tensor>> outs = interpret(**g, inputs);
  if (!outs)
    return outs.error().message().empty() ? "interpret failed with an empty message" : "";
  stage = RanOk;
  return "";
}

std::string tempModelPath() {
  return (fs::temp_directory_path() / fmt::format("nnc-fuzz-{}.onnx", getpid())).string();
}

/// Runs a case in a forked child with a time and memory limit.
std::string runForked(const Case &c, int timeoutSeconds, Stage &stage) {
  fs::path errPath = fs::temp_directory_path() / fmt::format("nnc-fuzz-{}.err", getpid());
  pid_t pid = fork();
  if (pid == 0) {
    FILE *ef = std::freopen(errPath.c_str(), "w", stderr);
    (void)ef;
    alarm(static_cast<unsigned>(timeoutSeconds));
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = rlim_t(6) << 30;
    setrlimit(RLIMIT_AS, &rl);
    Stage st;
    std::string model = tempModelPath();
    std::string r = runCase(c, model, st);
    std::remove(model.c_str());
    if (!r.empty()) {
      std::fprintf(stderr, "%s\n", r.c_str());
      std::fflush(stderr);
      _exit(99);
    }
    _exit(10 + st);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  // A child killed mid-case leaves its model file behind.
  std::error_code rmErr;
  fs::remove(fs::temp_directory_path() / fmt::format("nnc-fuzz-{}.onnx", pid), rmErr);
  if (WIFEXITED(status) && WEXITSTATUS(status) >= 10 && WEXITSTATUS(status) < 10 + NumStages) {
    stage = static_cast<Stage>(WEXITSTATUS(status) - 10);
    return "";
  }
  std::string err;
  {
    std::ifstream ef(errPath);
    std::ostringstream ss;
    ss << ef.rdbuf();
    err = ss.str();
  }
  std::error_code ec;
  fs::remove(errPath, ec);
  if (err.size() > 600)
    err = err.substr(0, 600);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("{}: {}", sig == SIGALRM ? "TIMEOUT" : strsignal(sig), err);
  }
  return fmt::format("exit {}: {}", WEXITSTATUS(status), err);
}

TEST(OnnxFuzz, MutatedTier1ModelsFailCleanly) {
  if (!fs::exists(fs::path(NNC_SHARED_DIR) / "onnx-tests" / "tier1.txt"))
    GTEST_SKIP() << "ONNX node tests not found at " << NNC_SHARED_DIR << "/onnx-tests";
  ASSERT_FALSE(seeds().empty());
  int64_t cases = envInt("NNC_FUZZ_CASES", 3000);
  uint64_t base = static_cast<uint64_t>(envInt("NNC_FUZZ_SEED", 1));
  int64_t only = envInt("NNC_FUZZ_ONLY", -1);
  bool forked = envInt("NNC_FUZZ_FORK", 0) != 0;
  std::string path = tempModelPath();
  int failures = 0;
  int stageCounts[NumStages] = {};
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < cases; ++i) {
    if (only >= 0 && i != only)
      continue;
    Case c = makeCase(static_cast<uint64_t>(i), base);
    if (only >= 0)
      std::printf("case %lld: %s\n", static_cast<long long>(i), c.what.c_str());
    auto t0 = std::chrono::steady_clock::now();
    Stage stage = ImportFailed;
    std::string r = forked ? runForked(c, 10, stage) : runCase(c, path, stage);
    ++stageCounts[stage];
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A hang detector, not a timing test: every case takes well under a second on an idle
    // machine, so only a runaway loop or allocation gets near this on a loaded CI machine.
    if (r.empty() && secs > 30)
      r = fmt::format("took {:.1f} s", secs);
    if (!r.empty()) {
      ++failures;
      ADD_FAILURE() << "case " << i << " " << c.what << ": " << r;
    }
  }
  std::error_code ec;
  fs::remove(path, ec);
  fs::remove(fs::temp_directory_path() / fmt::format("nnc-fuzz-{}.err", getpid()), ec);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%lld fuzz cases (seed %llu) in %.1f s, %d failures\n",
              static_cast<long long>(cases), static_cast<unsigned long long>(base), secs, failures);
  for (int k = 0; k < NumStages; ++k)
    std::printf("  %s: %d\n", kStageNames[k], stageCounts[k]);
}

} // namespace
