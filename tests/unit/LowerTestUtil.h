// Test helpers for lowering: random tensors, and a check that runs one node through
// lowerNode + kir::evaluateKernel (with and without its schedule applied) and compares the
// results with the interpreter's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <list>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestTarget.h"
#include "ThreadPool.h"
#include "nnc/codegen/LLVMCodegen.h"
#include "nnc/codegen/Lowering.h"
#include "nnc/ir/Graph.h"
#include "nnc/ir/Kernel.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Float16.h"

namespace nnc::lowertest {

/// A tensor of random values: floats in [lo, hi], integers in [lo, hi] (clamped to the
/// dtype's range), bools 50/50, storage-only formats random bytes.
inline Tensor randomTensor(DType t, const Extents &e, std::mt19937 &rng, double lo = -3,
                           double hi = 3) {
  Tensor x = Tensor::zeros(t, e);
  std::uniform_real_distribution<double> uf(lo, hi);
  int64_t ilo = static_cast<int64_t>(std::floor(lo)), ihi = static_cast<int64_t>(std::floor(hi));
  if (isUnsignedInteger(t) || t == DType::Bool)
    ilo = std::max<int64_t>(ilo, 0);
  if (t == DType::I8 || t == DType::U8) {
    ilo = std::max<int64_t>(ilo, t == DType::I8 ? -128 : 0);
    ihi = std::min<int64_t>(ihi, 127);
  }
  std::uniform_int_distribution<int64_t> ui(ilo, std::max(ilo, ihi));
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double f = uf(rng);
    int64_t v = ui(rng);
    switch (t) {
    case DType::F32: x.data<float>()[i] = static_cast<float>(f); break;
    case DType::F64: x.data<double>()[i] = f; break;
    case DType::F16: x.data<uint16_t>()[i] = floatToHalf(static_cast<float>(f)); break;
    case DType::BF16: x.data<uint16_t>()[i] = floatToBf16(static_cast<float>(f)); break;
    case DType::I8: x.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DType::U8: x.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::I16: x.data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case DType::U16: x.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case DType::I32: x.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::U32: x.data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
    case DType::I64: x.data<int64_t>()[i] = v; break;
    case DType::U64: x.data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
    case DType::Bool: x.data<bool>()[i] = (rng() & 1) != 0; break;
    default: x.data<uint8_t>()[i] = static_cast<uint8_t>(rng()); break;
    }
  }
  return x;
}

/// Compares two results: dtype, extents, then values (floats at rtol 1e-3 / `atol` with NaN
/// equal to NaN; everything else bit for bit).
inline void expectClose(const Tensor &got, const Tensor &want, const std::string &what,
                        double atol = 1e-7) {
  ASSERT_EQ(dtypeName(got.dtype()), dtypeName(want.dtype())) << what;
  ASSERT_EQ(extentsStr(got.extents()), extentsStr(want.extents())) << what;
  int bad = 0;
  for (int64_t i = 0; i < want.numElements() && bad < 5; ++i) {
    if (isFloat(want.dtype())) {
      double g = got.elementAsDouble(i), w = want.elementAsDouble(i);
      bool ok = (std::isnan(g) && std::isnan(w)) || g == w ||
                std::fabs(g - w) <= atol + 1e-3 * std::fabs(w);
      if (!ok) {
        ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
        ++bad;
      }
    } else {
      size_t es = dtypeSize(want.dtype());
      if (std::memcmp(static_cast<const char *>(got.rawData()) + i * es,
                      static_cast<const char *>(want.rawData()) + i * es, es) != 0) {
        ADD_FAILURE() << what << ": element " << i << " differs ("
                      << (isStorageOnly(want.dtype()) ? 0 : got.elementAsInt(i)) << " vs "
                      << (isStorageOnly(want.dtype()) ? 0 : want.elementAsInt(i)) << ")";
        ++bad;
      }
    }
  }
}

/// The concrete operands of `node`: constants from their constant nodes, graph inputs from
/// `inputs` (the values of the graph's inputs, in order); null Tensors for absent operands.
inline std::vector<Tensor> bindOperands(const Node &node, const std::vector<Tensor> &inputs) {
  std::vector<Tensor> ops;
  const std::vector<Value *> &gin = node.graph()->inputs();
  for (size_t i = 0; i < node.numOperands(); ++i) {
    Value *v = node.operand(i);
    if (!v) {
      ops.emplace_back();
    } else if (const Tensor *c = node.constantOperand(i)) {
      ops.push_back(*c);
    } else {
      size_t at = static_cast<size_t>(std::find(gin.begin(), gin.end(), v) - gin.begin());
      NNC_ASSERT(at < gin.size() && at < inputs.size(), "operand {} is not a graph input", i);
      ops.push_back(inputs[at]);
    }
  }
  return ops;
}

/// Runs the node's kernels (lowered with `opts` when given) on `ops` (one tensor per operand)
/// and returns its results. `scheduled` applies each kernel's schedule first.
inline Expected<std::vector<Tensor>> runLowered(const Node &node, const std::vector<Tensor> &ops,
                                                bool scheduled,
                                                const tuning::LowerOptions *opts = nullptr) {
  Expected<std::vector<kir::Kernel>> ks =
      opts ? lowerNode(node, "k", *opts) : lowerNode(node, "k", testenv::testLowerOptions());
  if (!ks)
    return ks.takeError();
  std::vector<Tensor> results;
  for (size_t r = 0; r < node.numResults(); ++r) {
    Tensor t = Tensor::zeros(node.result(r)->dtype(), *staticExtents(node.result(r)->shape()));
    std::memset(t.rawData(), 0xA5, t.byteSize()); // catches elements no kernel writes
    results.push_back(t);
  }
  std::vector<std::vector<char>> scratch(16);
  std::list<std::vector<char>> status;
  for (kir::Kernel k : *ks) {
    const int64_t *statusOf = nullptr;
    if (Error e = kir::verifyKernel(k))
      return Error(k.name + ": " + e.message() + "\n" + kir::printKernel(k));
    if (scheduled) {
      Expected<kir::Stmt> s = kir::applySchedule(k);
      if (!s)
        return Error(k.name + ": " + s.error().message() + "\n" + kir::printKernel(k));
      k.body = *s;
      k.schedule = {};
    }
    std::vector<void *> bufs;
    for (const kir::BufferDecl &b : k.buffers) {
      switch (b.role) {
      case kir::BufferRole::Operand:
        bufs.push_back(const_cast<void *>(ops.at(b.index).rawData()));
        break;
      case kir::BufferRole::Result: bufs.push_back(results.at(b.index).rawData()); break;
      case kir::BufferRole::Scratch: {
        std::vector<char> &v = scratch.at(b.index);
        v.resize(std::max(v.size(), static_cast<size_t>(b.numElements) * dtypeSize(b.dtype)));
        bufs.push_back(v.data());
        break;
      }
      case kir::BufferRole::Extent:
        return Error(k.name + ": runLowered has no extent buffers (data-dependent shapes)");
      case kir::BufferRole::Status: { // evaluateKernel zeroes it and reports a failed check
        std::vector<char> &v = status.emplace_back(static_cast<size_t>(b.numElements) * 8);
        bufs.push_back(v.data());
        statusOf = reinterpret_cast<const int64_t *>(v.data());
        break;
      }
      }
    }
    if (Error e = kir::evaluateKernel(k, bufs)) {
      // A failed runtime check is the node's error, as the runtime reports it.
      if (statusOf && kir::checkStatus(k, statusOf))
        return e;
      return Error(k.name + ": " + e.message() + "\n" + kir::printKernel(k));
    }
  }
  return results;
}

/// Runs the node's kernels compiled by the LLVM JIT (schedules applied) on `ops`.
inline Expected<std::vector<Tensor>> runJit(const Node &node, const std::vector<Tensor> &ops) {
  Expected<std::vector<kir::Kernel>> ks = lowerNode(node, "k", testenv::testLowerOptions());
  if (!ks)
    return ks.takeError();
  CodegenOptions opts(testenv::testCpu());
  opts.cacheDir = "";
  opts.parallelFor = &nnc_parallel_for;
  Expected<std::unique_ptr<CompiledModule>> mod = compileKernels(*ks, opts);
  if (!mod)
    return mod.takeError();
  std::vector<Tensor> results;
  for (size_t r = 0; r < node.numResults(); ++r) {
    Tensor t = Tensor::zeros(node.result(r)->dtype(), *staticExtents(node.result(r)->shape()));
    std::memset(t.rawData(), 0xA5, t.byteSize());
    results.push_back(t);
  }
  std::vector<std::vector<char>> scratch(16);
  std::list<std::vector<char>> status;
  for (const kir::Kernel &k : *ks) {
    std::vector<void *> bufs;
    const int64_t *statusOf = nullptr;
    for (const kir::BufferDecl &b : k.buffers) {
      if (b.role == kir::BufferRole::Operand) {
        bufs.push_back(const_cast<void *>(ops.at(b.index).rawData()));
      } else if (b.role == kir::BufferRole::Result) {
        bufs.push_back(results.at(b.index).rawData());
      } else if (b.role == kir::BufferRole::Status) {
        std::vector<char> &v = status.emplace_back(static_cast<size_t>(b.numElements) * 8, 0);
        bufs.push_back(v.data());
        statusOf = reinterpret_cast<const int64_t *>(v.data());
      } else {
        std::vector<char> &v = scratch.at(b.index);
        v.resize(std::max(v.size(), static_cast<size_t>(b.numElements) * dtypeSize(b.dtype)));
        bufs.push_back(v.data());
      }
    }
    KernelFn fn = (*mod)->lookup(k.name);
    if (!fn)
      return Error("no JIT entry point for " + k.name);
    fn(bufs.data());
    if (statusOf)
      NNC_TRY(kir::checkStatus(k, statusOf));
  }
  return results;
}

/// Whether checkNode also runs the kernels through the LLVM JIT (NNC_LOWER_TEST_JIT=1).
inline bool jitEnabled() {
  const char *e = std::getenv("NNC_LOWER_TEST_JIT");
  return e && std::string(e) == "1";
}

/// Lowers `node`, evaluates its kernels (unscheduled and scheduled) on `inputs` (the values
/// of the graph's inputs, in order) and compares with the interpreter.
inline void checkNode(const Node &node, const std::vector<Tensor> &inputs, const std::string &what,
                      const tuning::LowerOptions *opts = nullptr) {
  std::vector<Tensor> ops = bindOperands(node, inputs);
  Expected<std::vector<Tensor>> want = evaluateNode(node, ops);
  ASSERT_TRUE(want) << what << ": interpreter: " << want.error().message();
  for (int mode = 0; mode < (jitEnabled() && !opts ? 3 : 2); ++mode) {
    const char *how = mode == 0 ? "" : mode == 1 ? " (scheduled)" : " (jit)";
    Expected<std::vector<Tensor>> got =
        mode == 2 ? runJit(node, ops) : runLowered(node, ops, mode == 1, opts);
    ASSERT_TRUE(got) << what << how << ": " << got.error().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r)
      expectClose((*got)[r], (*want)[r], what + how + " result " + std::to_string(r));
  }
}

/// A constant node's result holding `t`.
inline Value *constantValue(Graph &g, const Tensor &t) {
  Expected<Node *> n = g.createInferred(OpKind::Constant, {}, {{"value", t}});
  EXPECT_TRUE(n) << n.error().message();
  return (*n)->result();
}

inline Tensor i64Vector(const std::vector<int64_t> &v) {
  return Tensor::fromVector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v);
}

} // namespace nnc::lowertest
