// Helpers shared by the lowerers (see LowerUtil.h).
#include "LowerUtil.h"

#include <algorithm>
#include <optional>

namespace nnc::lower {

Extents extentsOf(const Value *v) {
  std::optional<Extents> e = staticExtents(v->shape());
  NNC_ASSERT(e.has_value(), "value %{} has a symbolic shape {}", v->name(), v->type().str());
  return *e;
}

int64_t numElementsOf(const Extents &e) {
  int64_t n = 1;
  for (int64_t d : e)
    n *= d;
  return n;
}

std::vector<int64_t> stridesOf(const Extents &e) {
  std::vector<int64_t> s(e.size(), 1);
  for (int64_t i = static_cast<int64_t>(e.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * e[i + 1];
  return s;
}

kir::Expr flatIndex(const std::vector<kir::Expr> &idx, const std::vector<int64_t> &strides) {
  NNC_ASSERT(idx.size() == strides.size());
  kir::Expr sum = kir::intImm(0);
  for (size_t d = 0; d < idx.size(); ++d)
    if (strides[d] != 0)
      sum = kir::add(sum, kir::mul(idx[d], kir::intImm(strides[d])));
  return sum;
}

kir::Expr exactImmediate(const Tensor *t, DType type) {
  if (!t || t->numElements() != 1 || t->dtype() != type)
    return nullptr;
  bool exact = type == DType::F32 || type == DType::F64 || (isInteger(type) && dtypeSize(type) <= 4);
  return exact ? kir::constant(t->elementAsDouble(0), type) : nullptr;
}

kir::Expr broadcastIndex(const std::vector<kir::Expr> &outIdx, const Extents &in) {
  NNC_ASSERT(in.size() <= outIdx.size());
  size_t lead = outIdx.size() - in.size();
  std::vector<int64_t> s = stridesOf(in);
  std::vector<kir::Expr> idx(outIdx.begin() + static_cast<std::ptrdiff_t>(lead), outIdx.end());
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == 1)
      s[d] = 0;
  return flatIndex(idx, s);
}

Collapsed collapse(const Extents &out, const std::vector<Extents> &ins) {
  size_t r = out.size();
  std::vector<std::vector<bool>> bcast(ins.size(), std::vector<bool>(r, false));
  for (size_t k = 0; k < ins.size(); ++k) {
    size_t lead = r - ins[k].size();
    for (size_t d = 0; d < r; ++d) {
      int64_t e = d < lead ? 1 : ins[k][d - lead];
      bcast[k][d] = e == 1 && out[d] != 1;
    }
  }
  Collapsed c;
  c.in.resize(ins.size());
  std::vector<size_t> kept;
  for (size_t d = 0; d < r; ++d)
    if (out[d] != 1)
      kept.push_back(d);
  std::vector<std::vector<bool>> groupBcast(ins.size());
  for (size_t j = 0; j < kept.size(); ++j) {
    size_t d = kept[j];
    bool merge = j > 0;
    for (size_t k = 0; k < ins.size() && merge; ++k)
      merge = bcast[k][d] == bcast[k][kept[j - 1]];
    if (merge) {
      c.out.back() *= out[d];
    } else {
      c.out.push_back(out[d]);
      for (size_t k = 0; k < ins.size(); ++k)
        groupBcast[k].push_back(bcast[k][d]);
    }
  }
  for (size_t k = 0; k < ins.size(); ++k)
    for (size_t j = 0; j < c.out.size(); ++j)
      c.in[k].push_back(groupBcast[k][j] ? 1 : c.out[j]);
  return c;
}

DType movedType(DType t) {
  return isStorageOnly(t) ? DType::U8 : t;
}

KernelBuilder::KernelBuilder(const Node &node, std::string kernelName)
    : node_(node), name_(std::move(kernelName)) {}

int KernelBuilder::find(kir::BufferRole role, int index) const {
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].role == role && buffers_[b].index == index)
      return static_cast<int>(b);
  return -1;
}

int KernelBuilder::operand(size_t i) {
  int b = find(kir::BufferRole::Operand, static_cast<int>(i));
  if (b >= 0)
    return b;
  const Value *v = node_.operand(i);
  NNC_ASSERT(v != nullptr, "operand {} of {} is absent", i, node_.describe());
  buffers_.push_back({"in" + std::to_string(i), movedType(v->dtype()), numElementsOf(extentsOf(v)),
                      kir::BufferRole::Operand, static_cast<int>(i), /*written=*/false});
  return static_cast<int>(buffers_.size()) - 1;
}

int KernelBuilder::result(size_t i) {
  int b = find(kir::BufferRole::Result, static_cast<int>(i));
  if (b >= 0)
    return b;
  const Value *v = node_.result(i);
  buffers_.push_back({"out" + std::to_string(i), movedType(v->dtype()), numElementsOf(extentsOf(v)),
                      kir::BufferRole::Result, static_cast<int>(i),
                      /*written=*/true});
  return static_cast<int>(buffers_.size()) - 1;
}

std::pair<int, int> KernelBuilder::dynamicResult(size_t i, int64_t capacity) {
  const Value *v = node_.result(i);
  int symbolic = 0;
  for (const Dim &d : v->shape())
    symbolic += d.isStatic() ? 0 : 1;
  NNC_ASSERT(symbolic == 1, "result {} of {} has no single data-dependent dim", i,
             node_.describe());
  int data = find(kir::BufferRole::Result, static_cast<int>(i));
  if (data < 0) {
    buffers_.push_back({"out" + std::to_string(i), movedType(v->dtype()), capacity,
                        kir::BufferRole::Result, static_cast<int>(i), /*written=*/true});
    data = static_cast<int>(buffers_.size()) - 1;
  }
  int extent = find(kir::BufferRole::Extent, static_cast<int>(i));
  if (extent < 0) {
    buffers_.push_back({"extent" + std::to_string(i), DType::I64, 1, kir::BufferRole::Extent,
                        static_cast<int>(i), /*written=*/true});
    extent = static_cast<int>(buffers_.size()) - 1;
  }
  return {data, extent};
}

int KernelBuilder::scratch(int index, DType t, int64_t numElements, bool perThread) {
  int b = find(kir::BufferRole::Scratch, index);
  if (b >= 0)
    return b;
  buffers_.push_back({"tmp" + std::to_string(index), t, numElements, kir::BufferRole::Scratch,
                      index, /*written=*/true, perThread});
  return static_cast<int>(buffers_.size()) - 1;
}

int KernelBuilder::declare(kir::BufferDecl decl) {
  NNC_ASSERT(find(decl.role, decl.index) < 0, "buffer {} of {} declared twice", decl.name,
             node_.describe());
  buffers_.push_back(std::move(decl));
  return static_cast<int>(buffers_.size()) - 1;
}

kir::Expr KernelBuilder::load(int b, kir::Expr index) const {
  return kir::load(b, buffers_[b].dtype, std::move(index));
}

kir::Stmt KernelBuilder::store(int b, kir::Expr index, kir::Expr value) {
  buffers_[b].written = true;
  return kir::store(b, std::move(index), std::move(value));
}

kir::Stmt KernelBuilder::vecStore(int b, kir::Expr index, std::vector<kir::Expr> values) {
  buffers_[b].written = true;
  return kir::vecStore(b, std::move(index), std::move(values));
}

kir::Stmt KernelBuilder::gemmTile(const kir::GemmTileShape &shape, int c, kir::Expr aOff,
                                  kir::Expr bOff, kir::Expr cOff, kir::Expr kc) {
  buffers_[c].written = true;
  return kir::gemmTile(shape, c, std::move(aOff), std::move(bOff), std::move(cOff), std::move(kc));
}

kir::Stmt KernelBuilder::convTile(const kir::ConvTileShape &shape, int c,
                                  std::vector<kir::Expr> args) {
  buffers_[c].written = true;
  return kir::convTile(shape, c, std::move(args));
}

std::string KernelBuilder::freshName(const std::string &prefix) {
  return prefix + std::to_string(nextName_++);
}

kir::Expr KernelBuilder::bind(std::vector<kir::Stmt> &at, const std::string &prefix, DType t,
                              kir::Expr init) {
  std::string name = freshName(prefix);
  at.push_back(kir::decl(name, t, std::move(init)));
  return kir::var(name, t);
}

kir::Stmt
KernelBuilder::loopNest(const Extents &extents,
                        const std::function<kir::Stmt(const std::vector<kir::Expr> &)> &body,
                        std::vector<std::string> *loopNames) {
  std::vector<std::string> names;
  std::vector<kir::Expr> vars;
  for (size_t d = 0; d < extents.size(); ++d) {
    names.push_back(freshName("i"));
    vars.push_back(kir::var(names.back()));
  }
  kir::Stmt s = body(vars);
  for (size_t d = extents.size(); d-- > 0;)
    s = kir::forLoop(names[d], kir::intImm(extents[d]), s);
  if (loopNames)
    *loopNames = names;
  return s;
}

kir::Stmt KernelBuilder::check(kir::Expr failed, kir::Expr value, kir::RuntimeCheck c) {
  int status = find(kir::BufferRole::Status, 0);
  if (status < 0) {
    buffers_.push_back({"status", DType::I64, 0, kir::BufferRole::Status, 0, /*written=*/true});
    status = static_cast<int>(buffers_.size()) - 1;
  }
  int64_t at = 2 * static_cast<int64_t>(checks_.size());
  checks_.push_back(std::move(c));
  buffers_[status].numElements = at + 2;
  return kir::ifThen(std::move(failed),
                     kir::block({kir::store(status, kir::intImm(at), kir::intImm(1)),
                                 kir::store(status, kir::intImm(at + 1), std::move(value))}));
}

kir::Kernel KernelBuilder::finish(kir::Stmt body, kir::Schedule schedule) {
  kir::Kernel k;
  k.name = name_;
  k.buffers = buffers_;
  k.checks = checks_;
  k.body = std::move(body);
  k.schedule = std::move(schedule);
  return k;
}

kir::Expr andAll(const std::vector<kir::Expr> &conds) {
  kir::Expr c;
  for (const kir::Expr &e : conds)
    c = c ? kir::land(c, e) : e;
  return c;
}

kir::Expr sadd(kir::Expr a, kir::Expr b) {
  return kir::strict(kir::op(OpKind::Add, {std::move(a), std::move(b)}));
}
kir::Expr ssub(kir::Expr a, kir::Expr b) {
  return kir::strict(kir::op(OpKind::Sub, {std::move(a), std::move(b)}));
}
kir::Expr smul(kir::Expr a, kir::Expr b) {
  return kir::strict(kir::op(OpKind::Mul, {std::move(a), std::move(b)}));
}
kir::Expr sdiv(kir::Expr a, kir::Expr b) {
  return kir::strict(kir::op(OpKind::Div, {std::move(a), std::move(b)}));
}

kir::Expr loadInt(KernelBuilder &b, size_t operand, kir::Expr index) {
  int buf = b.operand(operand);
  kir::Expr v = b.load(buf, std::move(index));
  return b.bufferType(buf) == DType::I64 ? v : kir::cast(v, DType::I64);
}

kir::Schedule defaultSchedule(const std::vector<std::string> &loops, const Extents &extents,
                              bool vectorize) {
  using Step = kir::ScheduleStep;
  kir::Schedule s;
  if (!loops.empty())
    s.steps.push_back({Step::GpuGrid, "", 0, loops});
  if (loops.empty())
    return s;
  const std::string &inner = loops.back();
  bool vec = vectorize && extents.back() >= 16;
  if (numElementsOf(extents) < 65536) {
    // Too little work to share among threads, but still vectorized, as a loop whose
    // iterations are independent: left to itself, LLVM widened such a kernel with a runtime
    // overlap check of its buffers per vector, paid again for every short row (a
    // squeeze-excitation scale folded into a conv weight, 7 x 480 rows of 16).
    if (vectorize && extents.back() >= 4)
      s.steps.push_back({Step::Vectorize, inner, 0, {}});
    return s;
  }
  if (loops.size() == 1) {
    // A vectorized flat loop runs in strips of 1024: LLVM vectorizes the strip (16 lanes,
    // interleaved) with one runtime overlap check per strip, where strips of 16 paid that
    // check and a branch for every 16 elements (measured on a large elementwise chain:
    // bench/results/measurements-behind-defaults.md).
    s.steps.push_back({Step::Split, inner, vectorize ? 1024 : 16, {}});
    if (vectorize)
      s.steps.push_back({Step::Vectorize, inner + ".i", 0, {}});
    s.steps.push_back({Step::Parallel, inner + ".o", 0, {}});
    return s;
  }
  if (vec) {
    s.steps.push_back({Step::Split, inner, 16, {}});
    s.steps.push_back({Step::Vectorize, inner + ".i", 0, {}});
  } else if (vectorize && extents.back() >= 4) {
    // A short contiguous row (a channel block of 8 lanes under a broadcast operand) is one
    // vector as it is.
    s.steps.push_back({Step::Vectorize, inner, 0, {}});
  }
  // The outermost loop of two or more iterations (leading dims of 1, a batch of one, skipped).
  for (size_t d = 0; d + 1 < loops.size(); ++d)
    if (extents[d] >= 2) {
      s.steps.push_back({Step::Parallel, loops[d], 0, {}});
      break;
    }
  return s;
}

/// The schedule of a permutation's loop nest (output order, `inStrides` the input strides of
/// its loops). When the input's contiguous dim q is not the output's last dim l, q and l are
/// split into tiles of kTile and the two tile loops move innermost: a kTile x kTile block is
/// read along the input's lines and written along the output's, instead of one of the two
/// striding through memory for a whole row (tiles of 16 rows 4 KiB apart thrash L1 sets).
kir::Schedule permuteSchedule(const std::vector<std::string> &loops, const Extents &mid,
                              const std::vector<int64_t> &inStrides) {
  constexpr int64_t kTile = 8;
  size_t r = mid.size(), q = r;
  for (size_t i = 0; i < r; ++i)
    if (inStrides[i] == 1 && mid[i] > 1)
      q = i;
  if (r < 2 || q >= r - 1 || mid[q] < kTile / 2 || mid[r - 1] < kTile / 2)
    return defaultSchedule(loops, mid);
  using Step = kir::ScheduleStep;
  kir::Schedule s;
  s.steps.push_back({Step::GpuGrid, "", 0, loops});
  const std::string &lq = loops[q], &ll = loops[r - 1];
  s.steps.push_back({Step::Split, lq, kTile, {}});
  s.steps.push_back({Step::Split, ll, kTile, {}});
  std::vector<std::string> order{lq + ".o"};
  for (size_t i = q + 1; i + 1 < r; ++i)
    order.push_back(loops[i]);
  for (const std::string &t : {ll + ".o", lq + ".i", ll + ".i"})
    order.push_back(t);
  s.steps.push_back({Step::Reorder, "", 0, order});
  if (numElementsOf(mid) >= 65536) {
    size_t p = 0;
    while (p < q && mid[p] < 2)
      ++p;
    s.steps.push_back({Step::Parallel, p < q ? loops[p] : lq + ".o", 0, {}});
  }
  return s;
}

// ---- Index simplification with loop extents ---------------------------------------------

using kir::Expr;

namespace {

void terms(const Expr &e, std::vector<Expr> &out) {
  if (e->kind == kir::ExprKind::Op && e->op == OpKind::Add && e->type == DType::I64) {
    terms(e->args[0], out);
    terms(e->args[1], out);
    return;
  }
  out.push_back(e);
}

/// An exclusive upper bound of a non-negative index expression, or -1 when unknown.
int64_t boundOf(const Expr &e, const LoopExtents &env) {
  switch (e->kind) {
  case kir::ExprKind::IntImm: return e->intValue >= 0 ? e->intValue + 1 : -1;
  case kir::ExprKind::Var: {
    auto it = env.find(e->name);
    return it == env.end() ? -1 : it->second;
  }
  case kir::ExprKind::Op: {
    if (e->type != DType::I64)
      return -1;
    if (e->op == OpKind::Add) {
      int64_t a = boundOf(e->args[0], env), b = boundOf(e->args[1], env);
      return a < 0 || b < 0 ? -1 : a + b - 1;
    }
    if (e->op == OpKind::Mul) {
      int64_t a = boundOf(e->args[0], env), b = boundOf(e->args[1], env);
      return a < 0 || b < 0 ? -1 : (a - 1) * (b - 1) + 1;
    }
    if (e->op == OpKind::Mod && e->args[1]->kind == kir::ExprKind::IntImm)
      return e->args[1]->intValue;
    return -1;
  }
  default: return -1;
  }
}

/// The factor `k` when `e` is `x * k` or the constant k (so e is a multiple of k).
int64_t constFactor(const Expr &e) {
  if (e->kind == kir::ExprKind::IntImm)
    return e->intValue;
  if (e->kind == kir::ExprKind::Op && e->op == OpKind::Mul) {
    if (e->args[1]->kind == kir::ExprKind::IntImm)
      return e->args[1]->intValue;
    if (e->args[0]->kind == kir::ExprKind::IntImm)
      return e->args[0]->intValue;
  }
  return 1;
}

/// Term t / g, for a term t that is x * k or the constant k (k = constFactor(t)), g dividing k.
Expr divideTerm(const Expr &t, int64_t k, int64_t g) {
  if (t->kind == kir::ExprKind::IntImm)
    return kir::intImm(k / g);
  Expr x = t->args[1]->kind == kir::ExprKind::IntImm ? t->args[0] : t->args[1];
  return k == g ? x : kir::mul(x, kir::intImm(k / g));
}

/// A non-negative index e written as high * g + low with 0 <= low < g, for a g > 1 that
/// divides m: then e / m = high / (m / g) and e % m = (high % (m / g)) * g + low, so a
/// flat index r * cols + c (a GEMM epilogue's element, c < cols) broadcast by a modulus that
/// is a multiple of cols keeps c as it is (contiguous) and takes the modulus of r alone.
struct FactoredIndex {
  Expr high, low;
  int64_t g = 1;
};
std::optional<FactoredIndex> factorOut(const Expr &e, int64_t m, const LoopExtents &env) {
  std::vector<Expr> ts;
  terms(e, ts);
  std::vector<int64_t> cands;
  for (const Expr &t : ts) {
    int64_t k = constFactor(t);
    if (k > 1 && m % k == 0 && k < m)
      cands.push_back(k);
  }
  std::sort(cands.rbegin(), cands.rend());
  for (int64_t g : cands) {
    Expr high = kir::intImm(0), low = kir::intImm(0);
    for (const Expr &t : ts) {
      int64_t k = constFactor(t);
      if (k <= 0 || k % g != 0)
        low = kir::add(low, t);
      else
        high = kir::add(high, divideTerm(t, k, g));
    }
    int64_t b = boundOf(low, env);
    if (b >= 0 && b <= g)
      return FactoredIndex{high, low, g};
  }
  return std::nullopt;
}

} // namespace

/// e / m for a non-negative index e (terms that are multiples of m divide exactly; the rest,
/// when smaller than m, contributes nothing).
Expr divIndex(const Expr &e, int64_t m, const LoopExtents &env) {
  if (m == 1)
    return e;
  std::vector<Expr> ts;
  terms(e, ts);
  Expr q = kir::intImm(0), rest = kir::intImm(0);
  for (const Expr &t : ts) {
    int64_t k = constFactor(t);
    if (k != 0 && k % m == 0) {
      q = kir::add(q, divideTerm(t, k, m));
    } else {
      rest = kir::add(rest, t);
    }
  }
  int64_t b = boundOf(rest, env);
  if (b >= 0 && b <= m)
    return q;
  if (std::optional<FactoredIndex> f = factorOut(rest, m, env))
    return kir::add(q, kir::div(f->high, kir::intImm(m / f->g)));
  return kir::add(q, kir::div(rest, kir::intImm(m)));
}

/// e % m for a non-negative index e.
Expr modIndex(const Expr &e, int64_t m, const LoopExtents &env) {
  if (m == 1)
    return kir::intImm(0);
  std::vector<Expr> ts;
  terms(e, ts);
  Expr rest = kir::intImm(0);
  for (const Expr &t : ts) {
    int64_t k = constFactor(t);
    if (!(k != 0 && k % m == 0))
      rest = kir::add(rest, t);
  }
  int64_t b = boundOf(rest, env);
  if (b >= 0 && b <= m)
    return rest;
  if (std::optional<FactoredIndex> f = factorOut(rest, m, env))
    return kir::add(kir::mul(kir::mod(f->high, kir::intImm(m / f->g)), kir::intImm(f->g)), f->low);
  return kir::mod(rest, kir::intImm(m));
}

} // namespace nnc::lower
