// A fusion group's epilogue: the group analysis, the composition of the members' formulas at one
// element, and the final stores and pass that templates and the planner build from it
// (Epilogue.h).
#include "Epilogue.h"

#include <algorithm>

#include "nnc/ir/FusionGroup.h"

namespace nnc::lower {

using kir::Expr;
using kir::Stmt;

namespace {

Expr i64c(int64_t v) { return kir::intImm(v); }

/// The expression of the group's value at one element, built from the members' formulas; a
/// member value used more than once becomes a local.
class Composer {
public:
  Composer(const LoweringUnit &u, const std::set<const Node *> &members,
           const std::map<const Value *, int> &uses, std::string localPrefix,
           const std::function<Expr(size_t input)> &leaf, Expr anchorValue)
      : u_(u), members_(members), uses_(uses), prefix_(std::move(localPrefix)), leaf_(leaf),
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
    } else if (p && members_.count(p)) {
      std::vector<Expr> args;
      for (const Value *o : p->operands())
        args.push_back(valueOf(o));
      e = pointwiseExpr(*p, args);
      auto uit = uses_.find(v);
      if (uit != uses_.end() && uit->second > 1) {
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

  /// The locals to declare (in order) before the value is used.
  const std::vector<Stmt> &decls() const { return decls_; }

private:
  const LoweringUnit &u_;
  const std::set<const Node *> &members_;
  const std::map<const Value *, int> &uses_;
  std::string prefix_;
  const std::function<Expr(size_t)> &leaf_;
  Expr anchorValue_;
  std::map<const Value *, Expr> memo_;
  std::vector<Stmt> decls_;
};

} // namespace

Expected<std::unique_ptr<Epilogue>> Epilogue::of(const LoweringUnit &u) {
  std::unique_ptr<Epilogue> ep(new Epilogue(u));
  ep->members_.insert(u.members.begin(), u.members.end());
  Extents out = extentsOf(ep->value());
  std::vector<Extents> leaves;
  ep->leafSlot_.assign(u.operands.size(), -1);
  for (const Node *m : u.members) {
    if (m == u.anchor || (u.softmax && (m == u.softmax || m == u.node)))
      continue;
    const OpInfo &info = m->info();
    for (size_t k = 0; k < m->numOperands(); ++k) {
      const Value *o = m->operand(k);
      if (!o)
        return m->error("operand {} is missing", k);
      DType t = o->dtype();
      // cast, quantize and dequantize check their own operand dtypes (shape rules).
      bool ok = (isFusibleElementwise(*m) && !info.elementwise) ||
                (m->kind() == OpKind::Select && k == 0 ? t == DType::Bool
                                                       : typeClassAccepts(info.operandTypes, t));
      if (!ok || isStorageOnly(t) || isStorageOnly(m->result()->dtype()))
        return m->error("operand {} has dtype {}, which fused code generation does not support",
                        k, dtypeName(t));
      if (o->producer() && ep->members_.count(o->producer())) {
        ++ep->uses_[o];
        continue;
      }
      size_t idx = std::find(u.operands.begin(), u.operands.end(), o) - u.operands.begin();
      NNC_ASSERT(idx < u.operands.size(), "group input %{} not listed", o->name());
      if (ep->leafSlot_[idx] >= 0)
        continue;
      Extents e = extentsOf(o);
      if (e.size() > out.size())
        return m->error("operand %{} of rank {} does not broadcast to the group's result {}",
                        o->name(), e.size(), extentsStr(out));
      for (size_t d = 0; d < e.size(); ++d) {
        int64_t od = out[out.size() - e.size() + d];
        if (e[d] != od && e[d] != 1)
          return m->error("operand %{} {} does not broadcast to the group's result {}",
                          o->name(), extentsStr(e), extentsStr(out));
      }
      ep->leafSlot_[idx] = static_cast<int>(leaves.size());
      leaves.push_back(e);
    }
  }
  ep->space_ = collapse(out, leaves);
  return ep;
}

const Value *Epilogue::value() const {
  return u_.softmax ? u_.softmax->operand(0) : u_.node->result();
}

DType Epilogue::resultType() const { return movedType(u_.node->result()->dtype()); }

int64_t Epilogue::numElements() const { return numElementsOf(extentsOf(u_.node->result())); }

bool Epilogue::appliesAtStores() const { return u_.anchor && !u_.softmax; }

bool Epilogue::changesType() const {
  return u_.anchor && movedType(u_.anchor->result()->dtype()) != resultType();
}

int Epilogue::resultBuffer(KernelBuilder &kb) const {
  return kb.declare({"out0", resultType(), numElements(), kir::BufferRole::Result, 0,
                     /*written=*/true});
}

kir::BufferDecl Epilogue::inputBuffer(size_t k) const {
  const Value *v = u_.operands[k];
  return {"in" + std::to_string(k), movedType(v->dtype()), numElementsOf(extentsOf(v)),
          kir::BufferRole::Operand, static_cast<int>(k), /*written=*/false};
}

Epilogue::Inputs Epilogue::inputsOf(KernelBuilder &kb) const {
  NNC_ASSERT(u_.anchor, "an epilogue without an anchor reads no anchor kernel's buffers");
  Inputs in;
  auto declared = std::make_shared<std::map<size_t, int>>();
  in.buffer = [this, &kb, declared](size_t k) {
    auto it = declared->find(k);
    if (it != declared->end())
      return it->second;
    const Node &anchor = *u_.anchor;
    int b = -1;
    for (size_t d = 0; d < anchor.numOperands() && b < 0; ++d)
      if (anchor.operand(d) == u_.operands[k])
        b = kb.operand(d);
    if (b < 0) {
      // Declared once per kernel, however many places of it read the input.
      kir::BufferDecl decl = inputBuffer(k);
      decl.index = static_cast<int>(anchor.numOperands() + k);
      b = kb.find(decl.role, decl.index);
      if (b < 0)
        b = kb.declare(decl);
    }
    return (*declared)[k] = b;
  };
  in.load = [&kb](int b, Expr i) { return kb.load(b, std::move(i)); };
  return in;
}

void Epilogue::renumberOperands(kir::Kernel &k) const {
  const Node &anchor = *u_.anchor;
  int anchorOperands = static_cast<int>(anchor.numOperands());
  for (kir::BufferDecl &d : k.buffers)
    if (d.role == kir::BufferRole::Operand) {
      d.index = d.index >= anchorOperands
                    ? d.index - anchorOperands
                    : static_cast<int>(std::find(u_.operands.begin(), u_.operands.end(),
                                                 anchor.operand(d.index)) -
                                       u_.operands.begin());
      d.name = "in" + std::to_string(d.index);
    }
}

Expr Epilogue::compose(const std::string &prefix, const std::function<Expr(size_t)> &leaf,
                       Expr anchorValue, std::vector<Stmt> &decls) const {
  Composer c(u_, members_, uses_, prefix, leaf, std::move(anchorValue));
  Expr v = c.valueOf(value());
  decls.insert(decls.end(), c.decls().begin(), c.decls().end());
  return v;
}

std::vector<int> Epilogue::elementInputBuffers(KernelBuilder &kb) const {
  Inputs in = inputsOf(kb);
  std::vector<int> buffers;
  for (size_t k = 0; k < u_.operands.size(); ++k)
    if (readsOnlyAtElement(k))
      buffers.push_back(in.buffer(k));
  return buffers;
}

bool Epilogue::readsOnlyAtElement(size_t k) const {
  if (leafSlot_[k] < 0)
    return false;
  const Extents &le = space_.in[leafSlot_[k]];
  return le == space_.out && numElementsOf(le) != 1; // one element: read once (leafValue)
}

Expr Epilogue::leafValue(size_t k, const std::string &local, Inputs &in,
                         std::vector<Stmt> &hoisted,
                         const std::function<Expr(const Extents &)> &indexOf) const {
  const Extents &le = space_.in[leafSlot_[k]];
  // Loaded in the loop, LLVM cannot prove that the kernel's stores leave a scalar unchanged,
  // and the loop stays scalar.
  if (numElementsOf(le) != 1)
    return in.load(in.buffer(k), indexOf(le));
  auto it = in.scalars.find(k);
  if (it != in.scalars.end())
    return it->second;
  Expr v = in.load(in.buffer(k), i64c(0));
  // A one-element constant (a relu's zero, a quantize's scale) is its value: known, the
  // kernel expansion leaves out the NaN guards a loaded scalar needs.
  const Node *p = u_.operands[k]->producer();
  if (p && p->kind() == OpKind::Constant)
    if (Expr c = exactImmediate(&p->getTensor("value"), v->type))
      return in.scalars[k] = c;
  hoisted.push_back(kir::decl(local, v->type, v));
  return in.scalars[k] = kir::var(local, v->type);
}

Expr Epilogue::leafIndexAt(const Expr &at, const Extents &le, const LoopExtents &env) const {
  const Extents &ext = space_.out;
  if (le == ext)
    return at;
  std::vector<int64_t> strides = stridesOf(ext);
  std::vector<Expr> idx(ext.size());
  for (size_t d = 0; d < ext.size(); ++d)
    idx[d] = le[d] == 1 ? i64c(0)
                        : (d == 0 ? divIndex(at, strides[d], env)
                                  : modIndex(divIndex(at, strides[d], env), ext[d], env));
  return broadcastIndex(idx, le);
}

Expr Epilogue::apply(const Expr &at, const Expr &acc, const LoopExtents &env, Inputs &in,
                     std::vector<Stmt> &stmts, std::vector<Stmt> &hoisted) {
  std::string p = freshPrefix();
  stmts.push_back(kir::decl(p + "a", acc->type, acc));
  return compose(
      p,
      [&](size_t k) {
        return leafValue(k, p + "s" + std::to_string(k), in, hoisted,
                         [&](const Extents &le) { return leafIndexAt(at, le, env); });
      },
      kir::var(p + "a", acc->type), stmts);
}

void Epilogue::storeFinal(int b, const std::vector<std::pair<Expr, Expr>> &elements,
                          int64_t chunk, Inputs &in, std::vector<Stmt> &out,
                          std::vector<Stmt> &hoisted) {
  std::vector<Stmt> stores;
  for (const auto &[at, acc] : elements) {
    Expr value = apply(at, acc, {}, in, out, hoisted);
    std::string v = "fz" + std::to_string(next_++) + "_v";
    out.push_back(kir::decl(v, value->type, value));
    stores.push_back(kir::store(b, at, kir::var(v, value->type)));
    if (static_cast<int64_t>(stores.size()) == chunk) {
      out.insert(out.end(), stores.begin(), stores.end());
      stores.clear();
    }
  }
  out.insert(out.end(), stores.begin(), stores.end());
}

void Epilogue::vecStoreFinal(int b, const Expr &at, const std::vector<Expr> &lanes, Inputs &in,
                             std::vector<Stmt> &out, std::vector<Stmt> &hoisted) {
  std::vector<Expr> values;
  for (size_t l = 0; l < lanes.size(); ++l) {
    Expr value =
        apply(kir::add(at, i64c(static_cast<int64_t>(l))), lanes[l], {}, in, out, hoisted);
    std::string v = "fz" + std::to_string(next_++) + "_v";
    out.push_back(kir::decl(v, value->type, value));
    values.push_back(kir::var(v, value->type));
  }
  out.push_back(kir::vecStore(b, at, values));
}

int64_t Epilogue::chunkFor(const CpuTarget &cpu) const {
  return std::max<int64_t>(cpu.vectorBits / 8 / static_cast<int64_t>(dtypeSize(resultType())), 1);
}

Expr Epilogue::applyAt(const Expr &row, const Expr &col, int64_t rows, int64_t cols,
                       const Expr &acc, Inputs &in, std::vector<Stmt> &stmts,
                       std::vector<Stmt> &hoisted) {
  std::string p = freshPrefix();
  stmts.push_back(kir::decl(p + "r", DType::I64, row));
  stmts.push_back(kir::decl(p + "c", DType::I64, col));
  LoopExtents env{{p + "r", rows}, {p + "c", cols}};
  Expr at = kir::add(kir::mul(kir::var(p + "r"), i64c(cols)), kir::var(p + "c"));
  return apply(at, acc, env, in, stmts, hoisted);
}

Epilogue::InPlace Epilogue::inPlace(KernelBuilder &kb, int64_t rows, int64_t cols) {
  auto in = std::make_shared<Inputs>(inputsOf(kb));
  DType t = movedType(u_.anchor->result()->dtype());
  return [this, in, kbp = &kb, rows, cols, t](Expr row, Expr col,
                                             std::vector<Stmt> &hoisted) -> Stmt {
    KernelBuilder &kb = *kbp;
    std::string p = freshPrefix();
    std::vector<Stmt> stmts{kir::decl(p + "r", DType::I64, row),
                            kir::decl(p + "c", DType::I64, col)};
    LoopExtents env{{p + "r", rows}, {p + "c", cols}};
    Expr at = kir::add(kir::mul(kir::var(p + "r"), i64c(cols)), kir::var(p + "c"));
    int rb = kb.result(0);
    stmts.push_back(kir::decl(p + "a", t, kb.load(rb, at)));
    in->scalars.clear(); // `hoisted` belongs to this call's place in the kernel
    Expr value = compose(
        p,
        [&](size_t i) {
          return leafValue(i, p + "s" + std::to_string(i), *in, hoisted,
                           [&](const Extents &le) { return leafIndexAt(at, le, env); });
        },
        kir::var(p + "a", t), stmts);
    stmts.push_back(kb.store(rb, at, value));
    return kir::block(stmts);
  };
}

Epilogue::FromScratch Epilogue::fromScratch(KernelBuilder &kb, int64_t rows, int64_t cols) {
  auto in = std::make_shared<Inputs>(inputsOf(kb));
  DType t = movedType(u_.anchor->result()->dtype());
  return [this, in, kbp = &kb, rows, cols, t](Expr row, Expr col, int src, Expr srcAt,
                                             std::vector<Stmt> &hoisted) -> Stmt {
    KernelBuilder &kb = *kbp;
    std::vector<Stmt> stmts;
    in->scalars.clear(); // `hoisted` belongs to this call's place in the kernel
    std::string p = freshPrefix();
    stmts.push_back(kir::decl(p + "a", t, kb.load(src, std::move(srcAt))));
    Expr value = applyAt(row, col, rows, cols, kir::var(p + "a", t), *in, stmts, hoisted);
    Expr at = kir::add(kir::mul(row, i64c(cols)), col);
    stmts.push_back(kb.store(kb.result(0), at, value));
    return kir::block(stmts);
  };
}

Stmt Epilogue::pass(kir::Kernel &k, int src, int dst, std::vector<Stmt> *before) {
  Inputs in;
  auto bufOf = std::make_shared<std::map<size_t, int>>();
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].role == kir::BufferRole::Operand)
      (*bufOf)[k.buffers[b].index] = static_cast<int>(b);
  in.buffer = [this, &k, bufOf](size_t i) {
    auto it = bufOf->find(i);
    if (it != bufOf->end())
      return it->second;
    int b = static_cast<int>(k.buffers.size());
    k.buffers.push_back(inputBuffer(i));
    return (*bufOf)[i] = b;
  };
  in.load = [&k](int b, Expr i) { return kir::load(b, k.buffers[b].dtype, std::move(i)); };
  const Extents &ext = space_.out;
  int64_t count = numElements();
  int64_t cols = ext.empty() ? 1 : std::max<int64_t>(ext.back(), 1);
  int64_t rows = count / cols;
  std::string fr = "fz_r", fc = "fz_c";
  LoopExtents env{{fr, rows}, {fc, cols}};
  std::vector<Stmt> stmts, hoisted;
  Expr fv = kir::add(kir::mul(kir::var(fr), i64c(cols)), kir::var(fc));
  Expr value = apply(fv, kir::load(src, k.buffers[src].dtype, fv), env, in, stmts, hoisted);
  stmts.push_back(kir::store(dst, fv, value));
  if (before)
    before->insert(before->end(), hoisted.begin(), hoisted.end());
  else
    stmts.insert(stmts.begin(), hoisted.begin(), hoisted.end());
  for (const kir::ScheduleStep &st : defaultSchedule({fr, fc}, {rows, cols}).steps)
    k.schedule.steps.push_back(st);
  return kir::forLoop(fr, i64c(rows), kir::forLoop(fc, i64c(cols), kir::block(stmts)));
}

} // namespace nnc::lower
