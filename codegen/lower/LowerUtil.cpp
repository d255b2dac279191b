// Helpers shared by the lowerers (see LowerUtil.h).
#include "LowerUtil.h"

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
  NNC_ASSERT(v->rank() >= 1 && !v->shape().back().isStatic(),
             "result {} of {} has no data-dependent last dim", i, node_.describe());
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

int KernelBuilder::scratch(int index, DType t, int64_t numElements) {
  int b = find(kir::BufferRole::Scratch, index);
  if (b >= 0)
    return b;
  buffers_.push_back({"tmp" + std::to_string(index), t, numElements, kir::BufferRole::Scratch,
                      index, /*written=*/true});
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

std::string KernelBuilder::freshName(const std::string &prefix) {
  return prefix + std::to_string(nextName_++);
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

kir::Kernel KernelBuilder::finish(kir::Stmt body, kir::Schedule schedule) {
  kir::Kernel k;
  k.name = name_;
  k.buffers = buffers_;
  k.body = std::move(body);
  k.schedule = std::move(schedule);
  return k;
}

kir::Schedule defaultSchedule(const std::vector<std::string> &loops, const Extents &extents,
                              bool vectorize) {
  kir::Schedule s;
  if (loops.empty() || numElementsOf(extents) < 65536)
    return s;
  using Step = kir::ScheduleStep;
  const std::string &inner = loops.back();
  bool vec = vectorize && extents.back() >= 16;
  if (loops.size() == 1) {
    // A vectorized flat loop runs in strips of 1024: LLVM vectorizes the strip (16 lanes,
    // interleaved) with one runtime overlap check per strip, where strips of 16 paid that
    // check and a branch for every 16 elements (a 64 MiB elementwise chain at 1 thread: ~10%
    // faster, bench/results/measurements-behind-defaults.md).
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
  if (extents.front() >= 2)
    s.steps.push_back({Step::Parallel, loops.front(), 0, {}});
  return s;
}

} // namespace nnc::lower
