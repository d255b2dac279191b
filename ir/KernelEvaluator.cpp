// A slow tree-walking evaluator of kernels (schedule applied and composites expanded, as the
// backends see them), used by tests to check lowering and schedules independently of code
// generation.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "nnc/ir/Kernel.h"
#include "nnc/ir/ScalarOps.h" // the Ops.def formulas as functors, shared with the interpreter
#include "nnc/ir/Tensor.h"
#include "nnc/support/Float16.h"
#include "nnc/support/FloatFormats.h"

namespace nnc::kir {
namespace {

/// A scalar (ScalarOps.h's Number: integers sign- or zero-extended to 64 bits, floats as a
/// double holding a value of the dtype, bools as 0/1).
using Value = scalar::Number;

template <DType D> using Storage = typename DTypeStorage<D>::type;
template <DType D>
using Compute = std::conditional_t<D == DType::F16 || D == DType::BF16, float, Storage<D>>;

/// The value as the compute type of D (its own dtype).
template <DType D> Compute<D> as(const Value &v) {
  using T = Compute<D>;
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(v.f);
  else if constexpr (std::is_same_v<T, bool>)
    return v.i != 0;
  else
    return static_cast<T>(v.i);
}

/// Rounds a float to the precision of a float dtype.
double roundTo(DType t, double x) {
  switch (t) {
  case DType::F32: return static_cast<float>(x);
  case DType::F16: return halfToFloat(floatToHalf(static_cast<float>(x)));
  case DType::BF16: return bf16ToFloat(floatToBf16(static_cast<float>(x)));
  default: return x;
  }
}

template <typename T> Value makeValue(DType t, T x) {
  Value v;
  v.type = t;
  if constexpr (std::is_floating_point_v<T>)
    v.f = roundTo(t, x);
  else if constexpr (std::is_same_v<T, bool>)
    v.i = x ? 1 : 0;
  else if constexpr (std::is_signed_v<T>)
    v.i = static_cast<int64_t>(x);
  else
    v.i = static_cast<int64_t>(static_cast<uint64_t>(x));
  return v;
}

template <typename F> bool dispatch(DType t, F &&f) {
#define NNC_CASE(D)                                                                                \
  case DType::D: f(std::integral_constant<DType, DType::D>()); return true;
  switch (t) {
    NNC_CASE(F32)
    NNC_CASE(F64)
    NNC_CASE(F16)
    NNC_CASE(BF16)
    NNC_CASE(I8)
    NNC_CASE(U8)
    NNC_CASE(I16)
    NNC_CASE(U16)
    NNC_CASE(I32)
    NNC_CASE(U32)
    NNC_CASE(I64)
    NNC_CASE(U64)
    NNC_CASE(Bool)
  default: return false;
  }
#undef NNC_CASE
}

template <typename Fn> Value applyOp(OpKind kind, DType resultType, const Value *args) {
  Value out;
  out.type = resultType;
  DType t = kind == OpKind::Select ? args[1].type : args[0].type;
  dispatch(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (scalar::accepts(Fn::kTypes, D)) {
      using T = Compute<D>;
      if constexpr (std::is_same_v<Fn, scalar::FnSelect>) {
        out = args[0].i ? args[1] : args[2];
      } else if constexpr (Fn::kArity == 1) {
        T a = as<D>(args[0]);
        if constexpr (std::is_same_v<Fn, scalar::FnNeg> && scalar::kIsInt<T>)
          out = makeValue(resultType, scalar::sub<T>(T(0), a));
        else
          out = makeValue(resultType, Fn::apply(a, a, a));
      } else if constexpr (Fn::kArity == 2) {
        T a = as<D>(args[0]), b = as<D>(args[1]);
        out = makeValue(resultType, static_cast<std::conditional_t<
                                        std::is_same_v<decltype(Fn::apply(a, b, b)), bool>, bool,
                                        T>>(Fn::apply(a, b, b)));
      }
    }
  });
  out.type = resultType;
  return out;
}

Value evalOp(OpKind kind, DType resultType, const Value *args) {
  switch (kind) {
#define NNC_ELEMENTWISE(Id, ...)                                                                   \
  case OpKind::Id: return applyOp<scalar::Fn##Id>(kind, resultType, args);
#include "nnc/ir/Ops.def"
  default: break;
  }
  NNC_ASSERT(false, "evaluator: '{}' is not an elementwise op", opInfo(kind).name);
  return Value();
}

/// ONNX Cast of an arithmetic value: ScalarOps.h's one definition.
Value castValue(const Value &v, DType to) {
  if (v.type == to) // also keeps storage-only values (raw bytes) intact
    return v;
  return scalar::castNumber(v, to);
}

/// The storage-only value (a byte of `t`'s bits) as its canonical arithmetic value.
Value decodeStorage(const Value &v) {
  uint8_t b = static_cast<uint8_t>(v.i);
  Value out;
  out.type = storageCanonical(v.type);
  switch (v.type) {
  case DType::F8E4M3FN: out.f = fp::fromF8E4M3FN(b); break;
  case DType::F8E4M3FNUZ: out.f = fp::fromF8E4M3FNUZ(b); break;
  case DType::F8E5M2: out.f = fp::fromF8E5M2(b); break;
  case DType::F8E5M2FNUZ: out.f = fp::fromF8E5M2FNUZ(b); break;
  case DType::F4E2M1: out.f = fp::fromF4E2M1(b); break;
  case DType::F8E8M0: out.f = fp::fromF8E8M0(b); break;
  case DType::I4: out.i = fp::fromSubByteInt(b, 4, true); break;
  case DType::U4: out.i = fp::fromSubByteInt(b, 4, false); break;
  case DType::I2: out.i = fp::fromSubByteInt(b, 2, true); break;
  case DType::U2: out.i = fp::fromSubByteInt(b, 2, false); break;
  default: NNC_ASSERT(false, "evaluator: {} is not storage-only", dtypeName(v.type));
  }
  return out;
}

/// The canonical arithmetic value `c` (storageCanonical(to)) as a byte of `to`'s bits.
Value encodeStorage(const Value &c, DType to, bool saturate, const std::string &roundMode) {
  Value out;
  out.type = to;
  uint8_t b = 0;
  switch (to) {
  case DType::F8E4M3FN: b = fp::toF8E4M3FN(c.f, saturate); break;
  case DType::F8E4M3FNUZ: b = fp::toF8E4M3FNUZ(c.f, saturate); break;
  case DType::F8E5M2: b = fp::toF8E5M2(c.f, saturate); break;
  case DType::F8E5M2FNUZ: b = fp::toF8E5M2FNUZ(c.f, saturate); break;
  case DType::F4E2M1: b = fp::toF4E2M1(c.f); break;
  case DType::F8E8M0: {
    fp::E8M0Round mode = fp::E8M0Round::Up;
    bool known = roundMode.empty() || fp::parseE8M0Round(roundMode.c_str(), mode);
    NNC_ASSERT(known, "evaluator: cast to f8e8m0 with round mode '{}'", roundMode);
    b = fp::toF8E8M0(static_cast<float>(c.f), saturate, mode);
    break;
  }
  case DType::I4:
  case DType::U4: b = fp::toSubByteInt(c.u(), 4); break;
  case DType::I2:
  case DType::U2: b = fp::toSubByteInt(c.u(), 2); break;
  default: NNC_ASSERT(false, "evaluator: {} is not storage-only", dtypeName(to));
  }
  out.i = b;
  return out;
}

/// A cast expression: ONNX Cast, through the canonical arithmetic type of a storage-only side
/// (exactly the interpreter's conversions, runtime/interp/Cast.cpp).
Value castExpr(const Value &v, const ExprNode &e) {
  if (v.type == e.type)
    return v;
  Value src = isStorageOnly(v.type) ? decodeStorage(v) : v;
  if (!isStorageOnly(e.type))
    return castValue(src, e.type);
  return encodeStorage(castValue(src, storageCanonical(e.type)), e.type, e.saturate,
                       e.roundMode);
}

/// The bits of an f32/f64 as a same-width integer, or back.
Value bitCastValue(const Value &v, DType to) {
  Value out;
  out.type = to;
  if (v.type == DType::F32) {
    float f = static_cast<float>(v.f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out.i = to == DType::I32 ? int64_t(int32_t(u)) : int64_t(u);
  } else if (v.type == DType::F64) {
    std::memcpy(&out.i, &v.f, 8);
  } else if (to == DType::F32) {
    uint32_t u = static_cast<uint32_t>(v.i);
    float f;
    std::memcpy(&f, &u, 4);
    out.f = f;
  } else {
    std::memcpy(&out.f, &v.i, 8);
  }
  return out;
}

/// The truncating remainder; an integer divisor of 0 (or -1, signed) gives 0, where the
/// backends' instructions are undefined (the expansion of mod and fmod never lets them see it).
Value remValue(const Value &a, const Value &b) {
  Value out;
  out.type = a.type;
  if (a.type == DType::F32)
    out.f = std::fmod(static_cast<float>(a.f), static_cast<float>(b.f));
  else if (isFloat(a.type))
    out.f = std::fmod(a.f, b.f);
  else if (b.i == 0 || (isSignedInteger(a.type) && b.i == -1))
    out.i = 0;
  else if (isSignedInteger(a.type))
    out.i = a.i % b.i;
  else
    out.i = static_cast<int64_t>(a.u() % b.u());
  return out;
}

/// A Call of one of kMathFunctions, in the precision of `t`.
Value callValue(const std::string &name, DType t, const std::vector<Value> &args) {
  auto apply = [&](auto x, auto y) -> double {
    if (name == "exp")
      return std::exp(x);
    if (name == "tanh")
      return std::tanh(x);
    if (name == "erf")
      return std::erf(x);
    NNC_ASSERT(name == "pow", "evaluator: unknown math function '{}'", name);
    return std::pow(x, y);
  };
  Value out;
  out.type = t;
  double y = args.size() > 1 ? args[1].f : 0.0;
  out.f = t == DType::F32 ? apply(static_cast<float>(args[0].f), static_cast<float>(y))
                          : apply(args[0].f, y);
  return out;
}

struct Evaluator {
  using Env = std::vector<std::pair<std::string, Value>>;
  const Kernel &k;
  const std::vector<void *> &buffers;
  Env env;
  std::string failure;
  /// The work-group's local buffers (one group runs at a time).
  std::vector<std::vector<uint8_t>> localData;

  void *bufferPtr(int b) {
    return isLocalBuffer(b) ? static_cast<void *>(localData[b - kLocalBufferBase].data())
                            : buffers[b];
  }

  Value lookup(const std::string &name) {
    for (size_t i = env.size(); i-- > 0;)
      if (env[i].first == name)
        return env[i].second;
    if (failure.empty())
      failure = fmt::format("kernel {}: variable '{}' is not in scope", k.name, name);
    return Value();
  }

  bool inBounds(int b, int64_t index, const char *what) {
    if (!k.hasBuffer(b)) {
      if (failure.empty())
        failure = fmt::format("kernel {}: {} of buffer {} which does not exist", k.name, what, b);
      return false;
    }
    if (index < 0 || index >= k.bufferElements(b)) {
      if (failure.empty())
        failure = fmt::format("kernel {}: {} at index {} is out of bounds of buffer '{}' ({} "
                              "elements)",
                              k.name, what, index, k.bufferName(b), k.bufferElements(b));
      return false;
    }
    return true;
  }

  Value loadValue(int b, int64_t index) {
    Value out;
    if (!inBounds(b, index, "load"))
      return out;
    out.type = k.bufferType(b);
    const void *p = bufferPtr(b);
    if (isStorageOnly(out.type)) { // moved as raw bytes (one per element); no arithmetic
      out.i = static_cast<const uint8_t *>(p)[index];
      return out;
    }
    bool ok = dispatch(out.type, [&](auto tag) {
      constexpr DType D = decltype(tag)::value;
      Storage<D> s = static_cast<const Storage<D> *>(p)[index];
      if constexpr (D == DType::F16)
        out = makeValue(D, halfToFloat(s));
      else if constexpr (D == DType::BF16)
        out = makeValue(D, bf16ToFloat(s));
      else
        out = makeValue(D, s);
    });
    if (!ok && failure.empty())
      failure = fmt::format("kernel {}: buffer '{}' has dtype {}, which the kernel evaluator "
                            "does not support",
                            k.name, k.bufferName(b), dtypeName(out.type));
    return out;
  }

  void storeValue(int b, int64_t index, const Value &v) {
    if (!inBounds(b, index, "store"))
      return;
    DType t = k.bufferType(b);
    void *p = bufferPtr(b);
    if (isStorageOnly(t)) {
      static_cast<uint8_t *>(p)[index] = static_cast<uint8_t>(v.i);
      return;
    }
    bool ok = dispatch(t, [&](auto tag) {
      constexpr DType D = decltype(tag)::value;
      Storage<D> *q = static_cast<Storage<D> *>(p);
      if constexpr (D == DType::F16)
        q[index] = floatToHalf(static_cast<float>(v.f));
      else if constexpr (D == DType::BF16)
        q[index] = floatToBf16(static_cast<float>(v.f));
      else
        q[index] = as<D>(v);
    });
    if (!ok && failure.empty())
      failure = fmt::format("kernel {}: buffer '{}' has dtype {}, which the kernel evaluator "
                            "does not support",
                            k.name, k.bufferName(b), dtypeName(t));
  }

  Value expr(const Expr &e) {
    switch (e->kind) {
    case ExprKind::IntImm: {
      Value v;
      v.type = e->type;
      v.i = e->intValue;
      return v;
    }
    case ExprKind::FloatImm: {
      Value v;
      v.type = e->type;
      v.f = roundTo(e->type, e->floatValue);
      return v;
    }
    case ExprKind::Var: return lookup(e->name);
    case ExprKind::Load: return loadValue(e->buffer, expr(e->args[0]).i);
    case ExprKind::Cast: return castExpr(expr(e->args[0]), *e);
    case ExprKind::Op: {
      Value args[3];
      size_t n = e->args.size();
      NNC_ASSERT(n >= 1 && n <= 3);
      for (size_t a = 0; a < n; ++a)
        args[a] = expr(e->args[a]);
      if (n == 1) // the formulas of unary ops read a, b and c
        args[1] = args[2] = args[0];
      else if (n == 2)
        args[2] = args[1];
      return evalOp(e->op, e->type, args);
    }
    case ExprKind::BitCast:
      return bitCastValue(expr(e->args[0]), e->type);
    case ExprKind::Fma: {
      Value a = expr(e->args[0]), b = expr(e->args[1]), c = expr(e->args[2]);
      Value out;
      out.type = e->type;
      out.f = e->type == DType::F32 ? double(std::fma(float(a.f), float(b.f), float(c.f)))
                                    : std::fma(a.f, b.f, c.f);
      return out;
    }
    case ExprKind::Rem:
      return remValue(expr(e->args[0]), expr(e->args[1]));
    // The machine operations: within their defined range they are the ops' formulas (and
    // the expansions keep them there).
    case ExprKind::Quot:
    case ExprKind::Shl:
    case ExprKind::Shr: {
      Value args[3] = {expr(e->args[0]), expr(e->args[1]), Value()};
      args[2] = args[1];
      OpKind k = e->kind == ExprKind::Quot ? OpKind::Div
                 : e->kind == ExprKind::Shl ? OpKind::ShiftLeft
                                            : OpKind::ShiftRight;
      return evalOp(k, e->type, args);
    }
    case ExprKind::Convert: return castValue(expr(e->args[0]), e->type);
    case ExprKind::Call: {
      std::vector<Value> args;
      for (const Expr &a : e->args)
        args.push_back(expr(a));
      return callValue(e->name, e->type, args);
    }
    }
    return Value();
  }

  Value *local(const std::string &name) {
    for (size_t i = env.size(); i-- > 0;)
      if (env[i].first == name)
        return &env[i].second;
    return nullptr;
  }

  /// Runs the work-group whose outermost gpu_thread loop is `s`: every work-item keeps its
  /// own locals, and a statement holding a barrier runs phase by phase (each part between
  /// barriers for all work-items before the next part), as a barrier makes a device run it.
  void workGroup(const Stmt &s) {
    std::vector<std::pair<std::string, int64_t>> threads;
    Stmt body = s;
    while (body && ((body->kind == StmtKind::For && body->loopKind == LoopKind::GpuThread) ||
                    (body->kind == StmtKind::Block && body->body.size() == 1))) {
      if (body->kind == StmtKind::For)
        threads.push_back({body->name, expr(body->extent).i});
      body = body->body[0];
    }
    int64_t items = 1;
    for (const auto &t : threads)
      items *= t.second;
    std::vector<Env> envs(static_cast<size_t>(items), env);
    for (int64_t i = 0; i < items; ++i) {
      int64_t rest = i;
      for (size_t t = threads.size(); t-- > 0;) {
        Value v;
        v.i = rest % threads[t].second;
        rest /= threads[t].second;
        envs[i].emplace_back(threads[t].first, v);
      }
    }
    inGroup(body, envs);
  }

  void inGroup(const Stmt &s, std::vector<Env> &envs) {
    if (!failure.empty() || !s)
      return;
    if (!containsBarrier(s)) {
      for (Env &e : envs) {
        std::swap(env, e);
        stmt(s);
        std::swap(env, e);
      }
      return;
    }
    switch (s->kind) {
    case StmtKind::Barrier:
      return;
    case StmtKind::Block: {
      size_t mark = envs[0].size();
      for (const Stmt &b : s->body)
        inGroup(b, envs);
      for (Env &e : envs)
        e.resize(mark);
      return;
    }
    case StmtKind::For: { // a constant extent (the verifier says so)
      std::swap(env, envs[0]);
      int64_t n = expr(s->extent).i;
      std::swap(env, envs[0]);
      size_t slot = envs[0].size();
      for (Env &e : envs)
        e.emplace_back(s->name, Value());
      for (int64_t i = 0; i < n && failure.empty(); ++i) {
        for (Env &e : envs) {
          e.resize(slot + 1);
          e[slot].second.i = i;
        }
        inGroup(s->body[0], envs);
      }
      for (Env &e : envs)
        e.resize(slot);
      return;
    }
    default:
      if (failure.empty())
        failure = fmt::format("kernel {}: a barrier under a {} statement", k.name,
                              static_cast<int>(s->kind));
      return;
    }
  }

  void stmt(const Stmt &s) {
    if (!failure.empty() || !s)
      return;
    switch (s->kind) {
    case StmtKind::For: {
      if (s->loopKind == LoopKind::GpuThread) {
        workGroup(s);
        return;
      }
      int64_t n = expr(s->extent).i;
      env.emplace_back(s->name, Value());
      size_t slot = env.size() - 1;
      for (int64_t i = 0; i < n && failure.empty(); ++i) {
        env[slot].second.i = i;
        stmt(s->body[0]);
        env.resize(slot + 1); // locals declared by the body end with the iteration
      }
      env.resize(slot);
      return;
    }
    case StmtKind::Store: {
      int64_t index = expr(s->index).i;
      Value v = expr(s->value);
      if (failure.empty())
        storeValue(s->buffer, index, v);
      return;
    }
    case StmtKind::Decl: env.emplace_back(s->name, castValue(expr(s->value), s->type)); return;
    case StmtKind::Assign: {
      Value v = expr(s->value);
      Value *l = local(s->name);
      if (!l) {
        if (failure.empty())
          failure = fmt::format("kernel {}: assignment to undeclared '{}'", k.name, s->name);
        return;
      }
      *l = castValue(v, l->type);
      return;
    }
    case StmtKind::If: {
      bool c = expr(s->value).nonZero();
      size_t mark = env.size();
      if (c)
        stmt(s->body[0]);
      else if (s->body.size() > 1)
        stmt(s->body[1]);
      env.resize(mark);
      return;
    }
    case StmtKind::Block: {
      size_t mark = env.size();
      for (const Stmt &b : s->body)
        stmt(b);
      env.resize(mark);
      return;
    }
    case StmtKind::GemmTile: gemmTile(*s); return;
    case StmtKind::ConvTile: convTile(*s); return;
    case StmtKind::Prefetch:
      return; // a hint: no effect on the result
    case StmtKind::Barrier:
      return; // one work-item alone (outside workGroup) waits for none
    case StmtKind::VecLoad: {
      int64_t index = expr(s->index).i;
      for (size_t l = 0; l < s->names.size(); ++l)
        env.emplace_back(s->names[l], loadValue(s->buffer, index + static_cast<int64_t>(l)));
      return;
    }
    case StmtKind::VecStore: {
      int64_t index = expr(s->index).i;
      std::vector<Value> v;
      for (const Expr &a : s->args)
        v.push_back(expr(a));
      for (size_t l = 0; l < v.size() && failure.empty(); ++l)
        storeValue(s->buffer, index + static_cast<int64_t>(l), v[l]);
      return;
    }
    }
  }

  /// The conv tile's definition: each element's products fused into its sum in the
  /// reduction's nesting order, from its initial value; bf16: the (exact) products of the
  /// bf16 values added in that order to an f32 sum, W's input lanes in pairs (ConvTileShape).
  /// With sumEvery, each run of that many dim-0 steps sums from zero and is then added to
  /// the running sum.
  void convTile(const StmtNode &s) {
    const ConvTileShape &t = s.conv;
    const bool bf16 = t.elems == GemmElems::BF16;
    int64_t x0 = expr(s.args[0]).i, w0 = expr(s.args[1]).i, c0 = expr(s.args[2]).i,
            i0 = expr(s.args[3]).i;
    std::array<int64_t, 4> n{};
    for (int d = 0; d < 4; ++d)
      n[d] = std::max<int64_t>(0, expr(s.args[4 + d]).i);
    if (bf16 && n[3] % 2 != 0) {
      failure = fmt::format("bf16 conv_tile over {} input lanes, not a multiple of 2", n[3]);
      return;
    }
    for (int64_t m = 0; m < t.blocks && failure.empty(); ++m)
      for (int64_t r = 0; r < t.cols && failure.empty(); ++r)
        for (int64_t j = 0; j < t.lanes && failure.empty(); ++j) {
          float total = t.init < 0 ? 0.0f
                                   : static_cast<float>(
                                         loadValue(t.init, i0 + m * t.iblk + r * t.icol + j).f);
          float acc = t.sumEvery > 0 ? 0.0f : total;
          int64_t xb = x0 + r * t.xcol + (t.depthwise ? j : 0),
                  wb = w0 + m * t.wblk + (bf16 ? 2 * j : j);
          for (int64_t a = 0; a < n[0]; ++a) {
            for (int64_t b = 0; b < n[1]; ++b)
              for (int64_t c = 0; c < n[2]; ++c)
                for (int64_t d = 0; d < n[3] && failure.empty(); ++d) {
                  if (!t.kwCols.empty() &&
                      (c >= static_cast<int64_t>(t.kwCols.size()) || r < t.kwCols[c][0] ||
                       r >= t.kwCols[c][1]))
                    continue;
                  int64_t xo = a * t.xs[0] + b * t.xs[1] + c * t.xs[2] + d * t.xs[3];
                  int64_t wo = a * t.ws[0] + b * t.ws[1] + c * t.ws[2] +
                               (bf16 ? d / 2 * 2 * t.ws[3] + d % 2 : d * t.ws[3]);
                  if (bf16) {
                    acc += static_cast<float>(loadValue(t.x, xb + xo).f) *
                           static_cast<float>(loadValue(t.w, wb + wo).f);
                    continue;
                  }
                  acc = std::fma(static_cast<float>(loadValue(t.x, xb + xo).f),
                                 static_cast<float>(loadValue(t.w, wb + wo).f), acc);
                }
            if (t.sumEvery > 0 && ((a + 1) % t.sumEvery == 0 || a + 1 == n[0])) {
              total += acc;
              acc = 0.0f;
            }
          }
          Value v;
          v.type = DType::F32;
          v.f = t.sumEvery > 0 ? total : acc;
          if (failure.empty())
            storeValue(s.buffer, c0 + m * t.cblk + r * t.ccol + j, v);
        }
  }

  /// The microkernel's definition: f32 products summed in k order from the initial value
  /// (with sumEvery, each run of that many k steps from zero, then added to the sum);
  /// u8s8s32: the integer products summed in i32, wrapping; bf16: the (exact) products of the
  /// bf16 values added in k order to an f32 sum.
  void gemmTile(const StmtNode &s) {
    const GemmTileShape &t = s.tile;
    int64_t a0 = expr(s.args[0]).i, b0 = expr(s.args[1]).i, c0 = expr(s.args[2]).i,
            kc = expr(s.args[3]).i;
    if (t.elems == GemmElems::U8S8S32) {
      if (kc % 4 != 0) {
        failure = fmt::format("u8s8s32 gemm_tile over k < {}, not a multiple of 4", kc);
        return;
      }
      for (int64_t r = 0; r < t.mr && failure.empty(); ++r)
        for (int64_t j = 0; j < t.nr && failure.empty(); ++j) {
          int64_t ci = c0 + r * t.ldc + j;
          uint32_t acc = t.accumulate ? static_cast<uint32_t>(loadValue(s.buffer, ci).i) : 0u;
          for (int64_t p = 0; p < kc && failure.empty(); ++p) {
            int64_t a = loadValue(t.a, a0 + r * t.lda + p).i;
            int64_t b = loadValue(t.b, b0 + p / 4 * t.ldb + 4 * j + p % 4).i;
            acc += static_cast<uint32_t>(a * b);
          }
          Value v;
          v.type = DType::I32;
          v.i = static_cast<int32_t>(acc);
          if (failure.empty())
            storeValue(s.buffer, ci, v);
        }
      return;
    }
    if (t.elems == GemmElems::BF16) {
      if (kc % 2 != 0) {
        failure = fmt::format("bf16 gemm_tile over k < {}, not a multiple of 2", kc);
        return;
      }
      for (int64_t r = 0; r < t.mr && failure.empty(); ++r)
        for (int64_t j = 0; j < t.nr && failure.empty(); ++j) {
          int64_t ci = c0 + r * t.ldc + j;
          float acc = t.accumulate ? static_cast<float>(loadValue(s.buffer, ci).f) : 0.0f;
          for (int64_t p = 0; p < kc && failure.empty(); ++p)
            acc += static_cast<float>(loadValue(t.a, a0 + r * t.lda + p).f) *
                   static_cast<float>(loadValue(t.b, b0 + p / 2 * t.ldb + 2 * j + p % 2).f);
          Value v;
          v.type = DType::F32;
          v.f = acc;
          if (failure.empty())
            storeValue(s.buffer, ci, v);
        }
      return;
    }
    for (int64_t r = 0; r < t.mr && failure.empty(); ++r)
      for (int64_t j = 0; j < t.nr && failure.empty(); ++j) {
        int64_t ci = c0 + r * t.ldc + j;
        float total = t.accumulate ? static_cast<float>(loadValue(s.buffer, ci).f) : 0.0f;
        float acc = t.sumEvery > 0 ? 0.0f : total;
        for (int64_t p = 0; p < kc && failure.empty(); ++p) {
          acc = std::fma(static_cast<float>(loadValue(t.a, a0 + r * t.lda + p * t.ak).f),
                         static_cast<float>(loadValue(t.b, b0 + p * t.ldb + j).f), acc);
          if (t.sumEvery > 0 && ((p + 1) % t.sumEvery == 0 || p + 1 == kc)) {
            total += acc;
            acc = 0.0f;
          }
        }
        Value v;
        v.type = DType::F32;
        v.f = t.sumEvery > 0 ? total : acc;
        if (failure.empty())
          storeValue(s.buffer, ci, v);
      }
  }
};

} // namespace

Error evaluateKernel(const Kernel &k, const std::vector<void *> &buffers) {
  if (buffers.size() != k.buffers.size())
    return makeError("kernel {}: {} buffers given, the kernel has {}", k.name, buffers.size(),
                     k.buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b)
    if (!buffers[b] && k.buffers[b].numElements > 0)
      return makeError("kernel {}: buffer '{}' is null", k.name, k.buffers[b].name);
  // Invalid kernels get the verifier's message instead of undefined results.
  NNC_TRY(verifyKernel(k));
  NNC_ASSIGN_OR_RETURN(Stmt body, codegenBody(k));
  int status = -1;
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].role == BufferRole::Status) {
      status = static_cast<int>(b);
      std::memset(buffers[b], 0, static_cast<size_t>(k.buffers[b].numElements) * sizeof(int64_t));
    }
  Evaluator ev{k, buffers, {}, {}, {}};
  for (const LocalBuffer &l : k.locals)
    ev.localData.emplace_back(static_cast<size_t>(l.numElements) * dtypeSize(l.dtype));
  ev.stmt(body);
  if (!ev.failure.empty())
    return Error(ev.failure);
  if (status >= 0)
    return checkStatus(k, static_cast<const int64_t *>(buffers[status]));
  return Error::success();
}

Error checkStatus(const Kernel &k, const int64_t *status) {
  for (size_t c = 0; c < k.checks.size(); ++c)
    if (status[2 * c] != 0)
      return Error(k.checks[c].message(status[2 * c + 1]));
  return Error::success();
}

} // namespace nnc::kir
