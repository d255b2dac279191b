// Code generation of fusion groups (ir/FusionGroup.h): the elementwise members of a group are
// composed into one kernel expression (the load of an intermediate value is replaced by the
// expression that computes it, leaves are loaded with broadcasting index math), so no
// intermediate of a group gets a buffer.
//
// Algorithm (lowerUnit of a group):
//  1. Without an anchor: one loop nest over the root's extents, collapsed like a single
//     elementwise op's (dims that every leaf has in full or broadcasts merge); the innermost
//     body declares a local for every member value used more than once, then stores the
//     root's expression.
//  2. With an anchor (matmul, conv): its kernels come from its own lowering, which writes each
//     result element once, with its final value, at the element's flat index I (the contract
//     with the matmul/conv lowerers). Each such store `out[I] = v` becomes
//     `t = v; out[I] = E(t, leaves at I)`, the leaves' indices derived from I. A kernel that
//     reads its result buffer (it accumulates there) keeps accumulating in a scratch buffer
//     instead, and a loop appended to it applies E to every element. A matmul anchor whose
//     result keeps its dtype instead applies E in place inside its GEMM, per cache block
//     (lowerMatMulFinished), so the result is not read back from memory in a second pass.
#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "Gemm.h"
#include "LowerUtil.h"
#include "Lowerers.h"
#include "NNLowering.h"
#include "Templates.h"
#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {

namespace {

using kir::Expr;
using kir::Stmt;

Expr i64c(int64_t v) { return kir::intImm(v); }

using lower::divIndex;
using lower::LoopExtents;
using lower::modIndex;

/// The index of a leaf of extents `le` (broadcast to `ext`) at flat result index `at`: `at`
/// itself when nothing broadcasts, else the leaf's coordinates recovered from `at` (simplified
/// with the loop extents in `env`).
Expr leafIndexAt(const Expr &at, const Extents &le, const Extents &ext, const LoopExtents &env) {
  if (le == ext)
    return at;
  std::vector<int64_t> strides = lower::stridesOf(ext);
  std::vector<Expr> idx(ext.size());
  for (size_t d = 0; d < ext.size(); ++d)
    idx[d] = le[d] == 1 ? i64c(0)
                        : (d == 0 ? divIndex(at, strides[d], env)
                                  : modIndex(divIndex(at, strides[d], env), ext[d], env));
  return lower::broadcastIndex(idx, le);
}

// ---- Composition --------------------------------------------------------------------------------

/// The value the elementwise members compute: the root's, or an attention group's scores
/// (the softmax operand).
const Value *epilogueValue(const LoweringUnit &u) {
  return u.softmax ? u.softmax->operand(0) : u.node->result();
}

struct GroupInfo {
  std::set<const Node *> members;
  /// Uses of each member result inside the group (operand slots).
  std::map<const Value *, int> uses;
  /// Collapsed iteration space of the root and of each group input (same rank).
  lower::Collapsed space;
  /// Input k -> position in `space.in` (-1: not read by an elementwise member).
  std::vector<int> leafSlot;
};

/// The value of group input `in` for a Composer. A single-element leaf (a scalar constant:
/// GELU's sqrt(2), a relu's 0) is read once, into a local declared in `hoisted`, which the
/// caller places before its loop: loaded in the loop, LLVM cannot prove that the kernel's
/// stores leave it unchanged, and the loop stays scalar.
/// `scalars` keeps the locals already declared, by input. Any other leaf is loaded at
/// `indexOf(its extents)`.
Expr leafValue(const GroupInfo &gi, size_t in, const std::string &local,
               std::map<size_t, Expr> &scalars, std::vector<Stmt> &hoisted,
               const std::function<Expr(Expr index)> &loadAt,
               const std::function<Expr(const Extents &le)> &indexOf) {
  const Extents &le = gi.space.in[gi.leafSlot[in]];
  if (lower::numElementsOf(le) != 1)
    return loadAt(indexOf(le));
  auto it = scalars.find(in);
  if (it != scalars.end())
    return it->second;
  Expr v = loadAt(i64c(0));
  hoisted.push_back(kir::decl(local, v->type, v));
  return scalars[in] = kir::var(local, v->type);
}

Expected<GroupInfo> analyze(const LoweringUnit &u) {
  GroupInfo gi;
  gi.members.insert(u.members.begin(), u.members.end());
  Extents out = lower::extentsOf(epilogueValue(u));
  std::vector<Extents> leaves;
  gi.leafSlot.assign(u.operands.size(), -1);
  for (const Node *m : u.members) {
    if (m == u.anchor || (u.softmax && (m == u.softmax || m == u.node)))
      continue;
    const OpInfo &info = m->info();
    for (size_t k = 0; k < m->numOperands(); ++k) {
      const Value *o = m->operand(k);
      if (!o)
        return m->error("operand {} is missing", k);
      DType t = o->dtype();
      bool ok = m->kind() == OpKind::Cast ||
                (m->kind() == OpKind::Select && k == 0 ? t == DType::Bool
                                                       : typeClassAccepts(info.operandTypes, t));
      if (!ok || isStorageOnly(t) || isStorageOnly(m->result()->dtype()))
        return m->error("operand {} has dtype {}, which fused code generation does not support",
                        k, dtypeName(t));
      if (o->producer() && gi.members.count(o->producer())) {
        ++gi.uses[o];
        continue;
      }
      size_t idx = std::find(u.operands.begin(), u.operands.end(), o) - u.operands.begin();
      NNC_ASSERT(idx < u.operands.size(), "group input %{} not listed", o->name());
      if (gi.leafSlot[idx] >= 0)
        continue;
      Extents e = lower::extentsOf(o);
      if (e.size() > out.size())
        return m->error("operand %{} of rank {} does not broadcast to the group's result {}",
                        o->name(), e.size(), extentsStr(out));
      for (size_t d = 0; d < e.size(); ++d) {
        int64_t od = out[out.size() - e.size() + d];
        if (e[d] != od && e[d] != 1)
          return m->error("operand %{} {} does not broadcast to the group's result {}",
                          o->name(), extentsStr(e), extentsStr(out));
      }
      gi.leafSlot[idx] = static_cast<int>(leaves.size());
      leaves.push_back(e);
    }
  }
  gi.space = lower::collapse(out, leaves);
  return gi;
}

/// The expression of a group's root at one element, built from the members' formulas.
class Composer {
public:
  Composer(const LoweringUnit &u, const GroupInfo &gi, std::string localPrefix,
           std::function<Expr(size_t input)> leaf, Expr anchorValue)
      : u_(u), gi_(gi), prefix_(std::move(localPrefix)), leaf_(std::move(leaf)),
        anchorValue_(std::move(anchorValue)) {}

  /// The value of `v` (its expression, or a local holding it).
  Expr valueOf(const Value *v) {
    auto it = memo_.find(v);
    if (it != memo_.end())
      return it->second;
    Expr e;
    const Node *p = v->producer();
    if (u_.anchor && p == u_.anchor) {
      e = anchorValue_;
    } else if (p && gi_.members.count(p)) {
      std::vector<Expr> args;
      for (const Value *o : p->operands())
        args.push_back(valueOf(o));
      if (p->kind() == OpKind::Cast)
        e = kir::cast(args[0], p->result()->dtype(), p->getInt("saturate", 1) != 0,
                      p->getString("round_mode", "up"));
      else
        e = kir::op(p->kind(), args);
      auto uit = gi_.uses.find(v);
      if (uit != gi_.uses.end() && uit->second > 1) {
        std::string name = prefix_ + std::to_string(decls_.size());
        decls_.push_back(kir::decl(name, e->type, e));
        e = kir::var(name, e->type);
      }
    } else {
      size_t idx = std::find(u_.operands.begin(), u_.operands.end(), v) - u_.operands.begin();
      e = leaf_(idx);
    }
    memo_[v] = e;
    return e;
  }

  /// The locals to declare (in order) before the root's value is used.
  const std::vector<Stmt> &decls() const { return decls_; }

private:
  const LoweringUnit &u_;
  const GroupInfo &gi_;
  std::string prefix_;
  std::function<Expr(size_t)> leaf_;
  Expr anchorValue_;
  std::map<const Value *, Expr> memo_;
  std::vector<Stmt> decls_;
};

kir::BufferDecl inputBuffer(const LoweringUnit &u, size_t k) {
  const Value *v = u.operands[k];
  return {"in" + std::to_string(k), lower::movedType(v->dtype()),
          lower::numElementsOf(lower::extentsOf(v)), kir::BufferRole::Operand,
          static_cast<int>(k), /*written=*/false};
}

/// 1. A group without an anchor: its own loop nest.
Expected<std::vector<kir::Kernel>> lowerPointwiseGroup(const LoweringUnit &u,
                                                       const GroupInfo &gi,
                                                       const std::string &prefix) {
  const Value *res = u.node->result();
  int64_t count = lower::numElementsOf(lower::extentsOf(res));
  if (count == 0)
    return std::vector<kir::Kernel>{};
  kir::Kernel k;
  k.name = prefix;
  std::vector<int> bufOf(u.operands.size(), -1);
  for (size_t i = 0; i < u.operands.size(); ++i) {
    bufOf[i] = static_cast<int>(k.buffers.size());
    k.buffers.push_back(inputBuffer(u, i));
  }
  int ob = static_cast<int>(k.buffers.size());
  k.buffers.push_back({"out0", lower::movedType(res->dtype()), count, kir::BufferRole::Result, 0,
                       /*written=*/true});
  const Extents &ext = gi.space.out;
  std::vector<std::string> loops;
  std::vector<Expr> idx;
  for (size_t d = 0; d < ext.size(); ++d) {
    loops.push_back("i" + std::to_string(d));
    idx.push_back(kir::var(loops.back()));
  }
  std::vector<Stmt> hoisted;
  std::map<size_t, Expr> scalars;
  Composer c(
      u, gi, "v",
      [&](size_t in) {
        int b = bufOf[in];
        return leafValue(
            gi, in, "vs" + std::to_string(in), scalars, hoisted,
            [&](Expr at) { return kir::load(b, k.buffers[b].dtype, at); },
            [&](const Extents &le) { return lower::broadcastIndex(idx, le); });
      },
      nullptr);
  Expr value = c.valueOf(res);
  std::vector<Stmt> body = c.decls();
  body.push_back(kir::store(ob, lower::flatIndex(idx, lower::stridesOf(ext)), value));
  Stmt s = body.size() == 1 ? body[0] : kir::block(body);
  for (size_t d = ext.size(); d-- > 0;)
    s = kir::forLoop(loops[d], kir::intImm(ext[d]), s);
  if (!hoisted.empty()) {
    hoisted.push_back(s);
    s = kir::block(hoisted);
  }
  k.body = s;
  k.schedule = lower::defaultSchedule(loops, ext);
  return std::vector<kir::Kernel>{std::move(k)};
}

/// 2a. A matmul anchor whose result keeps its dtype: the epilogue finishes each element in
/// place inside the GEMM (lowerMatMulFinished: per cache block, while the block is in cache),
/// instead of a pass over the whole result after it.
Expected<std::vector<kir::Kernel>> lowerFinishedMatMulGroup(const LoweringUnit &u,
                                                            const GroupInfo &gi,
                                                            const std::string &prefix,
                                                            const tuning::LowerOptions &opts,
                                                            lower::MatMulPath path) {
  const Node &anchor = *u.anchor;
  DType t = lower::movedType(anchor.result()->dtype());
  const Extents &ext = gi.space.out;
  int64_t count = lower::numElementsOf(lower::extentsOf(u.node->result()));
  int64_t cols = std::max<int64_t>(lower::extentsOf(anchor.result()).back(), 1);
  int64_t rows = count / cols;
  int64_t anchorOperands = static_cast<int64_t>(anchor.numOperands());
  std::map<size_t, int> bufOf; // group input -> kernel buffer
  int local = 0;
  auto makeFinish = [&](lower::KernelBuilder &kb) -> lower::ElementFinish {
    bufOf.clear();
    return [&, kbp = &kb](Expr row, Expr col, std::vector<Stmt> &hoisted) -> Stmt {
      lower::KernelBuilder &kb = *kbp;
      // A group input is the anchor's own operand buffer, or one declared here with index
      // anchorOperands + input (renumbered below, clear of the anchor's operand indices).
      auto bufferOfInput = [&](size_t in) {
        auto it = bufOf.find(in);
        if (it != bufOf.end())
          return it->second;
        int b = -1;
        for (int64_t d = 0; d < anchorOperands && b < 0; ++d)
          if (anchor.operand(d) == u.operands[in])
            b = kb.operand(d);
        if (b < 0) {
          kir::BufferDecl decl = inputBuffer(u, in);
          decl.index = static_cast<int>(anchorOperands + static_cast<int64_t>(in));
          b = kb.declare(decl);
        }
        bufOf[in] = b;
        return b;
      };
      std::string p = "fz" + std::to_string(local++) + "_";
      std::vector<Stmt> stmts{kir::decl(p + "r", DType::I64, row),
                              kir::decl(p + "c", DType::I64, col)};
      LoopExtents env{{p + "r", rows}, {p + "c", cols}};
      Expr at = kir::add(kir::mul(kir::var(p + "r"), i64c(cols)), kir::var(p + "c"));
      int rb = kb.result(0);
      stmts.push_back(kir::decl(p + "a", t, kb.load(rb, at)));
      std::map<size_t, Expr> scalars; // `hoisted` belongs to this call's place in the GEMM
      Composer c(
          u, gi, p,
          [&](size_t in) {
            int b = bufferOfInput(in);
            return leafValue(
                gi, in, p + "s" + std::to_string(in), scalars, hoisted,
                [&](Expr i) { return kb.load(b, i); },
                [&](const Extents &le) { return leafIndexAt(at, le, ext, env); });
          },
          kir::var(p + "a", t));
      Expr value = c.valueOf(u.node->result());
      for (const Stmt &s : c.decls())
        stmts.push_back(s);
      stmts.push_back(kb.store(rb, at, value));
      return kir::block(stmts);
    };
  };
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks,
                       lower::lowerMatMulFinished(anchor, prefix, &opts, makeFinish, path));
  for (kir::Kernel &k : ks)
    for (kir::BufferDecl &d : k.buffers)
      if (d.role == kir::BufferRole::Operand) {
        d.index = d.index >= anchorOperands
                      ? static_cast<int>(d.index - anchorOperands)
                      : static_cast<int>(std::find(u.operands.begin(), u.operands.end(),
                                                   anchor.operand(d.index)) -
                                         u.operands.begin());
        d.name = "in" + std::to_string(d.index);
      }
  return ks;
}

/// Anchors whose kernels store each result element once, its final value, from straight-line
/// register tiles: their epilogue can rewrite those stores. (winograd_output's tiles are the
/// body of a loop over the lanes that the loop vectorizer takes, which the epilogue in its
/// stores keeps.)
bool storesEachResultOnce(OpKind k) {
  return k == OpKind::ConvNCHWc || k == OpKind::WinogradOutput;
}

/// The loop under which a kernel's work-group nest (gpu_block / gpu_thread loops, outermost)
/// runs each work-item's statements: the innermost loop of that nest, or null when the body
/// does not start with one. Such a kernel stores each result element once, from one
/// work-item (the GPU GEMM), and nothing may precede or follow its nest.
Stmt workGroupNestBody(const Stmt &body) {
  auto isGpuLoop = [](const Stmt &s) {
    return s && s->kind == kir::StmtKind::For &&
           (s->loopKind == kir::LoopKind::GpuBlock || s->loopKind == kir::LoopKind::GpuThread);
  };
  Stmt s = body, inner;
  while (s && ((s->kind == kir::StmtKind::Block && s->body.size() == 1) || isGpuLoop(s))) {
    if (isGpuLoop(s))
      inner = s;
    s = s->body.empty() ? nullptr : s->body[0];
  }
  return inner;
}

/// True when `s` or a statement in it is a GemmTile writing buffer `b`.
bool writesThroughTile(const Stmt &s, int b) {
  if (!s)
    return false;
  if (s->kind == kir::StmtKind::GemmTile && s->buffer == b)
    return true;
  for (const Stmt &c : s->body)
    if (writesThroughTile(c, b))
      return true;
  return false;
}

/// 2b. A group with an anchor: the anchor's kernels with the epilogue in their result stores.
Expected<std::vector<kir::Kernel>> lowerEpilogueGroup(const LoweringUnit &u, const GroupInfo &gi,
                                                      const std::string &prefix,
                                                      const tuning::LowerOptions &opts) {
  const Node &anchor = *u.anchor;
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerNode(anchor, prefix, opts));
  const Value *res = u.node->result();
  DType resType = lower::movedType(res->dtype());
  DType anchorType = lower::movedType(anchor.result()->dtype());
  int64_t count = lower::numElementsOf(lower::extentsOf(res));
  const Extents &ext = gi.space.out;
  int nextScratch = 0;
  for (const kir::Kernel &k : ks)
    for (const kir::BufferDecl &b : k.buffers)
      if (b.role == kir::BufferRole::Scratch)
        nextScratch = std::max(nextScratch, b.index + 1);
  // The epilogue runs once, after the one kernel that writes the anchor's result.
  int writers = 0;
  for (const kir::Kernel &k : ks)
    for (const kir::BufferDecl &b : k.buffers)
      writers += b.role == kir::BufferRole::Result;
  if (writers != 1)
    return anchor.error("epilogue fusion needs exactly one kernel writing the result, got {}",
                        writers);
  int local = 0;
  std::deque<kir::Kernel> separate; // epilogue kernels of their own (OpenCL), appended to ks
  for (kir::Kernel &k : ks) {
    // Anchor operands become group inputs.
    int rb = -1;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      kir::BufferDecl &d = k.buffers[b];
      if (d.role == kir::BufferRole::Operand) {
        const Value *v = anchor.operand(d.index);
        d.index = static_cast<int>(std::find(u.operands.begin(), u.operands.end(), v) -
                                   u.operands.begin());
        d.name = "in" + std::to_string(d.index);
      } else if (d.role == kir::BufferRole::Result) {
        if (d.index != 0)
          return anchor.error("kernel '{}' writes result {}; epilogue fusion needs one result",
                              k.name, d.index);
        rb = static_cast<int>(b);
      }
    }
    if (rb < 0)
      continue;
    if (k.buffers[rb].dtype != anchorType || k.buffers[rb].numElements != count)
      return anchor.error("kernel '{}': its result buffer does not match the group's result",
                          k.name);
    // The kernel the epilogue goes into: k itself, or (on an OpenCL device) a kernel of its
    // own after k.
    kir::Kernel *target = &k;
    std::map<size_t, int> bufOf; // group input -> buffer of *target
    for (size_t b = 0; b < k.buffers.size(); ++b)
      if (k.buffers[b].role == kir::BufferRole::Operand)
        bufOf[k.buffers[b].index] = static_cast<int>(b);
    auto bufferOfInput = [&](size_t in) {
      auto it = bufOf.find(in);
      if (it != bufOf.end())
        return it->second;
      int b = static_cast<int>(target->buffers.size());
      target->buffers.push_back(inputBuffer(u, in));
      bufOf[in] = b;
      return b;
    };
    // The epilogue of the element at flat index `at` whose anchor value is `v`; its scalar
    // leaves are read once per kernel (however many stores the epilogue rewrites).
    std::map<size_t, Expr> scalars;
    auto epilogue = [&](const Expr &at, const Expr &v, const LoopExtents &env,
                        std::vector<Stmt> &stmts, std::vector<Stmt> &hoisted) {
      std::string t = "fz" + std::to_string(local++) + "_";
      stmts.push_back(kir::decl(t + "a", v->type, v));
      Composer c(
          u, gi, t,
          [&](size_t in) {
            int b = bufferOfInput(in);
            return leafValue(
                gi, in, t + "s" + std::to_string(in), scalars, hoisted,
                [&](Expr i) { return kir::load(b, target->buffers[b].dtype, i); },
                [&](const Extents &le) { return leafIndexAt(at, le, ext, env); });
          },
          kir::var(t + "a", v->type));
      Expr value = c.valueOf(res);
      for (const Stmt &s : c.decls())
        stmts.push_back(s);
      return value;
    };
    // A GPU work-group nest whose work-items store each of their result elements once (the
    // NDRange GEMM's scalar or vector stores) takes its epilogue in those stores too: nothing
    // may follow the nest in its kernel. (A GemmTile there accumulates onto stores of the
    // bias: those are not final, and the epilogue goes into a kernel of its own below.)
    Stmt nest = workGroupNestBody(k.body);
    bool nestStoresOnce = nest && !writesThroughTile(k.body, rb);
    if ((storesEachResultOnce(anchor.kind()) || nestStoresOnce) &&
        k.buffers[rb].dtype == resType) {
      // Each element is stored once, from a register of a straight-line tile: the epilogue
      // runs on the value before its store, while the tile's residual and output lines are
      // in L1 (a pass afterwards rereads the whole result).
      // A run of consecutive stores (a tile) is cut into chunks of one vector register's
      // elements; each chunk computes its epilogue values first, then stores them: loads of
      // the group's inputs never follow a store of their chunk that might alias them, so the
      // SLP vectorizer can still turn each chunk into vector code. (All of a tile's values
      // first, up to 2 x 14 x 16 on AVX-512, left LLVM more live vectors than registers: it
      // spilled and shuffled RegNet-Y's fused 1x1 convs, a third of their unfused speed.)
      const int64_t chunk =
          std::max<int64_t>(opts.cpu.vectorBits / 8 / static_cast<int64_t>(dtypeSize(resType)), 1);
      std::vector<Stmt> hoisted;
      auto isResultStore = [&](const Stmt &st) {
        return st && st->kind == kir::StmtKind::Store && st->buffer == rb;
      };
      // A vector store of the result (a GPU tile's vstoreN): the epilogue of each lane, then
      // the vector store of the finished lanes.
      auto rewriteVecStore = [&](const Stmt &st, std::vector<Stmt> &out) {
        std::vector<Expr> lanes;
        for (size_t l = 0; l < st->args.size(); ++l) {
          Expr at = kir::add(st->index, i64c(static_cast<int64_t>(l)));
          Expr value = epilogue(at, st->args[l], {}, out, hoisted);
          std::string v = "fz" + std::to_string(local++) + "_v";
          out.push_back(kir::decl(v, value->type, value));
          lanes.push_back(kir::var(v, value->type));
        }
        out.push_back(kir::vecStore(rb, st->index, lanes));
      };
      std::function<void(Stmt &)> rewrite = [&](Stmt &st) {
        if (!st)
          return;
        if (isResultStore(st) || (st->kind == kir::StmtKind::VecStore && st->buffer == rb))
          st = kir::block({st});
        std::vector<Stmt> out;
        for (size_t i = 0; i < st->body.size();) {
          const Stmt &c = st->body[i];
          if (c && c->kind == kir::StmtKind::VecStore && c->buffer == rb) {
            rewriteVecStore(c, out);
            ++i;
            continue;
          }
          if (!isResultStore(st->body[i])) {
            rewrite(st->body[i]);
            out.push_back(st->body[i++]);
            continue;
          }
          std::vector<Stmt> stores;
          for (; i < st->body.size() && isResultStore(st->body[i]); ++i) {
            const Stmt &o = st->body[i];
            Expr value = epilogue(o->index, o->value, {}, out, hoisted);
            std::string v = "fz" + std::to_string(local++) + "_v";
            out.push_back(kir::decl(v, value->type, value));
            stores.push_back(kir::store(rb, o->index, kir::var(v, value->type)));
            if (static_cast<int64_t>(stores.size()) == chunk) {
              out.insert(out.end(), stores.begin(), stores.end());
              stores.clear();
            }
          }
          out.insert(out.end(), stores.begin(), stores.end());
        }
        st->body = std::move(out);
      };
      rewrite(k.body);
      if (nest) {
        // The scalar leaves are read per work-item, inside the nest.
        hoisted.insert(hoisted.end(), nest->body.begin(), nest->body.end());
        nest->body = {kir::block(hoisted)};
        continue;
      }
      hoisted.push_back(k.body);
      k.body = kir::block(hoisted);
      continue;
    }
    // The epilogue runs as one pass over the finished result, after the anchor's loops: in
    // the result buffer itself when the types agree, else from a scratch accumulator.
    // (Rewriting each store of a register-blocked GEMM tile instead keeps LLVM from
    // vectorizing the tile.) On an OpenCL device the pass is a kernel of its own: a kernel
    // is one NDRange, and a pass after the anchor's grid in the same kernel would run on
    // one work-item.
    int src = rb, ob = rb;
    if (k.buffers[rb].dtype != resType) {
      kir::BufferDecl &acc = k.buffers[rb];
      acc.role = kir::BufferRole::Scratch;
      acc.index = nextScratch++;
      acc.name = "tmp" + std::to_string(acc.index);
      if (!opts.gpu) {
        ob = static_cast<int>(k.buffers.size());
        k.buffers.push_back({"out0", resType, count, kir::BufferRole::Result, 0, /*written=*/true});
      }
    }
    if (opts.gpu) {
      kir::Kernel e;
      e.name = k.name + "_epilogue";
      e.buffers.push_back(k.buffers[rb]);
      e.buffers[0].written = e.buffers[0].role == kir::BufferRole::Result;
      src = ob = 0;
      if (k.buffers[rb].role == kir::BufferRole::Scratch) {
        ob = 1;
        e.buffers.push_back({"out0", resType, count, kir::BufferRole::Result, 0, /*written=*/true});
      }
      separate.push_back(std::move(e));
      target = &separate.back();
      bufOf.clear();
      scalars.clear();
    }
    // Rows of the result's last dim: a leaf broadcast along rows (a bias) is then read at
    // the column index, contiguously, instead of at a flat index modulo the row length.
    int64_t cols = ext.empty() ? 1 : std::max<int64_t>(ext.back(), 1);
    int64_t rows = count / cols;
    std::string fr = "fz_r", fc = "fz_c";
    LoopExtents env{{fr, rows}, {fc, cols}};
    std::vector<Stmt> stmts, hoisted;
    Expr fv = kir::add(kir::mul(kir::var(fr), i64c(cols)), kir::var(fc));
    Expr value = epilogue(fv, kir::load(src, anchorType, fv), env, stmts, hoisted);
    stmts.push_back(kir::store(ob, fv, value));
    std::vector<Stmt> body;
    if (target == &k) {
      body.push_back(k.body);
      body.insert(body.end(), hoisted.begin(), hoisted.end());
    } else {
      // The grid's loops are the whole kernel: its scalar leaves are read per work-item.
      stmts.insert(stmts.begin(), hoisted.begin(), hoisted.end());
    }
    body.push_back(kir::forLoop(fr, i64c(rows), kir::forLoop(fc, i64c(cols), kir::block(stmts))));
    target->body = body.size() == 1 ? body[0] : kir::block(body);
    for (const kir::ScheduleStep &st : lower::defaultSchedule({fr, fc}, {rows, cols}).steps)
      target->schedule.steps.push_back(st);
  }
  for (kir::Kernel &e : separate)
    ks.push_back(std::move(e));
  return ks;
}

/// 3. An attention group, per batch entry b and block of up to kAttnRows query rows:
///    scores[r, :] = Q[b, i0 + r, :]·K^T[b] (the GEMM nest, microkernels for f32, into scratch, in
///    the matmul's accumulator type), then per row the epilogue (scale, mask, ...; none when the
///    scores are softmax's operand as they are, in its dtype), its maximum and e = exp(x - max)
///    with the sum s, then out[b, i0 + r, :] = (e·V[b]) / s (a second GEMM whose finish
///    divides the row's E results by its sum, rather than its T probabilities before). Only
///    a block of score rows per batch entry is ever stored (scratch of up to kAttnRows x T
///    per entry), never the [.., S, T] matrix.
constexpr int64_t kAttnRows = 32;

Expected<std::vector<kir::Kernel>> lowerAttentionGroup(const LoweringUnit &u, const GroupInfo &gi,
                                                       const std::string &prefix,
                                                       const tuning::LowerOptions &opts) {
  const CpuTarget &cpu = opts.cpu;
  using lower::extentsOf;
  using lower::nnl::i64;
  const Node &mm1 = *u.anchor, &mm2 = *u.node;
  const Value *qv = mm1.operand(0), *ktv = mm1.operand(1), *vv = mm2.operand(1);
  const Value *scores = u.softmax->operand(0);
  Extents qe = extentsOf(qv), ke = extentsOf(ktv), ve = extentsOf(vv),
          oe = extentsOf(mm2.result()), se = extentsOf(scores);
  DType t = qv->dtype();
  size_t r = qe.size();
  bool ok = r >= 2 && ke.size() == r && ve.size() == r && oe.size() == r && se.size() == r &&
            (t == DType::F32 || t == DType::F64) && ktv->dtype() == t && vv->dtype() == t &&
            scores->dtype() == t && u.softmax->result()->dtype() == t;
  for (size_t d = 0; ok && d + 2 < r; ++d)
    ok = ke[d] == qe[d] && ve[d] == qe[d] && oe[d] == qe[d];
  if (!ok)
    return mm2.error("attention fusion needs Q, K^T, V and the result of one float dtype, "
                     "rank >= 2 and equal batch dims; got {}, {}, {} and {}",
                     extentsStr(qe), extentsStr(ke), extentsStr(ve), extentsStr(oe));
  int64_t S = qe[r - 2], D = qe[r - 1], T = ke[r - 1], E = ve[r - 1];
  int64_t B = lower::numElementsOf(Extents(qe.begin(), qe.end() - 2));
  if (ke[r - 2] != D || ve[r - 2] != T || oe[r - 2] != S || oe[r - 1] != E ||
      se[r - 2] != S || se[r - 1] != T)
    return mm2.error("attention fusion: inner dims of {}, {} and {} do not match",
                     extentsStr(qe), extentsStr(ke), extentsStr(ve));
  if (B * S * E == 0)
    return std::vector<kir::Kernel>{};
  if (opts.onWork)
    opts.onWork(2.0 * double(B) * double(S) * double(T) * double(D + E));
  // Accumulators as the matmul lowering's (f32 for f32).
  DType acc1 = lower::nnl::accType(t, /*wide=*/false), acc2 = acc1;
  lower::KernelBuilder kb(mm2, prefix);
  std::vector<int> bufOf(u.operands.size());
  for (size_t i = 0; i < u.operands.size(); ++i)
    bufOf[i] = kb.declare(inputBuffer(u, i));
  auto inputIndex = [&](const Value *v) {
    return static_cast<size_t>(std::find(u.operands.begin(), u.operands.end(), v) -
                               u.operands.begin());
  };
  int qb = bufOf[inputIndex(qv)], ktb = bufOf[inputIndex(ktv)], vb = bufOf[inputIndex(vv)];
  int ob = kb.result(0);
  // The two GEMMs take the target CPU's default configs (they are parts of this kernel, not
  // problems the tuner times on their own).
  tuning::LowerOptions gemmOpts(cpu);
  auto gemmConfig = [&](DType acc, int64_t m, int64_t k, int64_t n, const char *what) {
    tuning::Config c = tuning::chooseConfig(lower::gemmProblem(acc, 1, m, k, n, what), &gemmOpts);
    c["par"] = 0;
    return c;
  };
  // Blocks of whole register tiles of the scores' GEMM (30 rows for 6-row tiles): a row edge
  // in every block would run a short tile, whose few accumulator chains leave the FMA
  // latency uncovered, once per block.
  int64_t rows = std::min(S, kAttnRows);
  if (S > kAttnRows) {
    tuning::Config probe = gemmConfig(acc1, rows, D, T, "attention scores");
    int64_t mr = probe.count("mr") ? probe.at("mr") : 1;
    if (mr > 1 && mr <= rows)
      rows = rows / mr * mr;
  }
  int sb = kb.scratch(0, acc1, B * rows * T), pb = kb.scratch(1, t, B * rows * T),
      sumb = kb.scratch(2, t, B * rows);
  Expr b = kir::var("b");
  auto ld = [&](int buf, Expr idx) { return kb.load(buf, std::move(idx)); };
  // Row r of the block's scratch matrices (row-major, T per row).
  auto blockAt = [&](Expr row, Expr col) {
    return kir::add(kir::mul(kir::add(kir::mul(b, i64(rows)), row), i64(T)), col);
  };
  // Where the block's row `row` keeps its softmax sum.
  auto rowSumAt = [&](Expr row) { return kir::add(kir::mul(b, i64(rows)), row); };
  kir::Schedule sched;

  // The work of one block of `m` rows starting at query row i0.
  auto blockBody = [&](Expr i0, int64_t m) {
    std::vector<Stmt> body;
    auto qRowOf = [&](Expr rr) { return kir::add(kir::mul(b, i64(S)), kir::add(i0, rr)); };
    // Scores.
    lower::GemmOperands g1;
    g1.a = qb;
    g1.b = ktb;
    g1.c = sb;
    g1.acc = acc1;
    g1.aIndex = [&](Expr rr, Expr d) { return kir::add(kir::mul(qRowOf(rr), i64(D)), d); };
    g1.bIndex = [&](Expr d, Expr jj) {
      return kir::add(kir::mul(kir::add(kir::mul(b, i64(D)), d), i64(T)), jj);
    };
    g1.cIndex = blockAt;
    g1.strided = lower::GemmOperands::Strided{kir::mul(qRowOf(i64(0)), i64(D)),
                                              kir::mul(b, i64(D * T)),
                                              kir::mul(b, i64(rows * T)), D, 1, T, T};
    tuning::Config c1 = gemmConfig(acc1, m, D, T, "attention scores");
    body.push_back(lower::gemmNest(kb, g1, m, D, T, c1, {}, sched));

    // Per row: epilogue into p and the maximum; exp(x - max) into p and the sum, kept for
    // P·V's finish. Every name is fresh: a kernel has this block twice when S has a tail.
    std::string rv = kb.freshName("r"), iv = kb.freshName("i"), jv = kb.freshName("j"),
                j2v = kb.freshName("j"), sv = kb.freshName("sv"), evn = kb.freshName("ev"),
                mxv = kb.freshName("mx"), sumv = kb.freshName("sum"), exv = kb.freshName("ex");
    Expr rr = kir::var(rv), j = kir::var(jv), mx = kir::var(mxv, t), sum = kir::var(sumv, t);
    LoopExtents env{{"b", B}, {iv, S}, {jv, T}};
    std::vector<Stmt> row{kir::decl(iv, DType::I64, kir::add(i0, rr))};
    std::string epPrefix = kb.freshName("ep") + "_";
    std::map<size_t, Expr> scalars;
    Composer c(
        u, gi, epPrefix,
        [&](size_t in) -> Expr { // scalar leaves: once per row, before its loop
          return leafValue(
              gi, in, epPrefix + "s" + std::to_string(in), scalars, row,
              [&](Expr i) { return ld(bufOf[in], i); },
              [&](const Extents &le) {
                Expr at =
                    kir::add(kir::mul(kir::add(kir::mul(b, i64(S)), kir::var(iv)), i64(T)), j);
                return leafIndexAt(at, le, gi.space.out, env);
              });
        },
        kir::var(sv, t));
    Expr ev = c.valueOf(scores);
    // Without an epilogue, the maximum and exp read the scores where the GEMM left them.
    bool identity =
        c.decls().empty() && ev->kind == kir::ExprKind::Var && ev->name == sv && acc1 == t;
    int xb = identity ? sb : pb;
    if (!identity) {
      std::vector<Stmt> epi{kir::decl(sv, t, kir::cast(ld(sb, blockAt(rr, j)), t))};
      for (const Stmt &s : c.decls())
        epi.push_back(s);
      epi.push_back(kir::decl(evn, t, ev));
      epi.push_back(kb.store(pb, blockAt(rr, j), kir::var(evn, t)));
      row.push_back(kir::forLoop(jv, i64(T), kir::block(epi)));
    }
    // The row's maximum, in vector lanes: NaN operands may be ignored there, since a NaN
    // score also makes its exp, the row's sum and so every result of the row NaN (as a +inf
    // does through exp(inf - inf)), the same results as a NaN-propagating maximum gives.
    std::string jmv = kb.freshName("jm");
    row.push_back(kir::decl(mxv, t, kir::constant(-std::numeric_limits<double>::infinity(), t)));
    row.push_back(kir::forLoop(
        jmv, i64(T), kir::accumulateIgnoringNaN(mxv, t, ld(xb, blockAt(rr, kir::var(jmv))))));
    sched.steps.push_back({kir::ScheduleStep::Vectorize, jmv, 0, {}});
    row.push_back(kir::decl(sumv, t, kir::constant(0, t)));
    Expr j2 = kir::var(j2v);
    row.push_back(kir::forLoop(
        j2v, i64(T),
        kir::block(
            {kir::decl(exv, t, kir::op(OpKind::Exp, {kir::sub(ld(xb, blockAt(rr, j2)), mx)})),
             kb.store(pb, blockAt(rr, j2), kir::var(exv, t)),
             kir::accumulate(sumv, kir::add(sum, kir::var(exv, t)))})));
    row.push_back(kb.store(sumb, rowSumAt(rr), sum));
    body.push_back(kir::forLoop(rv, i64(m), kir::block(row)));

    // out = P·V.
    lower::GemmOperands g2;
    g2.a = pb;
    g2.b = vb;
    g2.c = ob;
    g2.acc = acc2;
    g2.aIndex = blockAt;
    g2.bIndex = [&](Expr jj, Expr e) {
      return kir::add(kir::mul(kir::add(kir::mul(b, i64(T)), jj), i64(E)), e);
    };
    g2.cIndex = [&](Expr r2, Expr e) { return kir::add(kir::mul(qRowOf(r2), i64(E)), e); };
    g2.strided = lower::GemmOperands::Strided{kir::mul(b, i64(rows * T)), kir::mul(b, i64(T * E)),
                                              kir::mul(qRowOf(i64(0)), i64(E)), T, 1, E, E};
    // Softmax's division, on the row's E results.
    g2.finish = [&](Expr r2, Expr e, std::vector<Stmt> &) {
      Expr at = g2.cIndex(r2, e);
      return kb.store(ob, at, kir::div(ld(ob, at), ld(sumb, rowSumAt(r2))));
    };
    tuning::Config c2 = gemmConfig(acc2, m, T, E, "attention values");
    body.push_back(lower::gemmNest(kb, g2, m, T, E, c2, {}, sched));
    return kir::block(body);
  };

  std::vector<Stmt> perBatch;
  int64_t full = S / rows, tail = S % rows;
  if (full > 0) {
    std::string blk = kb.freshName("blk");
    perBatch.push_back(
        kir::forLoop(blk, i64(full), blockBody(kir::mul(kir::var(blk), i64(rows)), rows)));
  }
  if (tail > 0)
    perBatch.push_back(blockBody(i64(full * rows), tail));
  Stmt body = kir::forLoop("b", i64(B), kir::block(perBatch));
  if (B >= 2 && B * S * T * (D + E) >= 65536)
    sched.steps.push_back({kir::ScheduleStep::Parallel, "b", 0, {}});
  return std::vector<kir::Kernel>{kb.finish(body, sched)};
}

} // namespace

Expected<std::vector<LoweringUnit>> loweringUnits(const Graph &g) {
  NNC_ASSIGN_OR_RETURN(std::vector<FusionGroup> groups, fusionGroups(g));
  std::map<const Node *, const FusionGroup *> groupOf;
  for (const FusionGroup &fg : groups)
    if (fg.members.size() > 1)
      for (const Node *m : fg.members)
        groupOf[m] = &fg;
  std::vector<LoweringUnit> units;
  for (Node *n : g.nodes()) {
    if (n->kind() == OpKind::Constant)
      continue;
    auto it = groupOf.find(n);
    LoweringUnit u;
    u.node = n;
    if (it == groupOf.end()) {
      u.operands = n->operands();
      u.pointwise = n->info().elementwise;
    } else {
      const FusionGroup &fg = *it->second;
      if (fg.root != n)
        continue;
      u.operands = fg.inputs;
      u.members.assign(fg.members.begin(), fg.members.end());
      u.anchor = fg.anchor;
      u.softmax = fg.softmax;
      // A view reads its operands at other indices than it writes.
      u.pointwise = fg.anchor == nullptr && !fg.hasViews;
    }
    units.push_back(std::move(u));
  }
  return units;
}

namespace lower {

Expected<Kernels> lowerAttentionGroupUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(GroupInfo gi, analyze(u));
  return lowerAttentionGroup(u, gi, prefix, opts);
}

bool finishesInGemm(const LoweringUnit &u) {
  if (!u.anchor || u.softmax)
    return false;
  const Node &anchor = *u.anchor;
  return anchor.kind() == OpKind::MatMul && anchor.numOperands() == 2 && anchor.operand(1) &&
         anchor.operand(1)->rank() >= 2 && !lower::extentsOf(anchor.result()).empty() &&
         lower::movedType(u.node->result()->dtype()) ==
             lower::movedType(anchor.result()->dtype()) &&
         !isStorageOnly(anchor.result()->dtype()) &&
         lower::numElementsOf(lower::extentsOf(anchor.result())) ==
             lower::numElementsOf(lower::extentsOf(u.node->result()));
}

Expected<Kernels> lowerFinishedMatMulUnit(const LoweringUnit &u, const std::string &prefix,
                                          const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(GroupInfo gi, analyze(u));
  return lowerFinishedMatMulGroup(u, gi, prefix, opts, MatMulPath::Tiles);
}

Expected<Kernels> lowerFinishedMatMulUnitNDRange(const LoweringUnit &u, const std::string &prefix,
                                                 const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(GroupInfo gi, analyze(u));
  return lowerFinishedMatMulGroup(u, gi, prefix, opts, MatMulPath::NDRange);
}

} // namespace lower

namespace {

Expected<std::vector<kir::Kernel>> lowerUnitKernels(const LoweringUnit &u,
                                                    const std::string &namePrefix,
                                                    const tuning::LowerOptions &opts) {
  if (u.members.empty())
    return lowerNode(*u.node, namePrefix, opts);
  for (const Value *v : u.operands)
    if (!isStatic(v->shape()))
      return u.node->error("operand %{} has a symbolic shape {}; specialize shapes first",
                           v->name(), v->type().str());
  if (lower::isViewGroup(u))
    return lower::lowerViewGroup(u, namePrefix);
  // A group template (attention.fused_group, epilogue.gemm_finish), else the anchor's kernels
  // with the epilogue in their stores, or one loop nest.
  return lower::lowerWithTemplate(
      lower::chooseTemplate(u, opts), u, namePrefix, opts,
      [&](const tuning::LowerOptions &o) -> Expected<std::vector<kir::Kernel>> {
        NNC_ASSIGN_OR_RETURN(GroupInfo gi, analyze(u));
        if (u.anchor)
          return lowerEpilogueGroup(u, gi, namePrefix, o);
        return lowerPointwiseGroup(u, gi, namePrefix);
      });
}

} // namespace

Expected<std::vector<kir::Kernel>> lowerUnit(const LoweringUnit &u, const std::string &namePrefix,
                                             const tuning::LowerOptions &opts) {
  NNC_ASSIGN_OR_RETURN(std::vector<kir::Kernel> ks, lowerUnitKernels(u, namePrefix, opts));
  // On an OpenCL device a kernel of several nests in sequence would run as one work-item.
  if (opts.gpu)
    return splitGridPhases(std::move(ks));
  return ks;
}

} // namespace nnc
