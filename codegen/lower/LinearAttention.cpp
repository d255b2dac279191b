// Lowerer of linear_attention (ONNX LinearAttention-27; runtime/interp/LinearAttention.cpp is
// the reference). Column m of a kv head's state S [dk, dv] evolves on its own: the decay
// scales its rows, the delta rule reads S^T k at m only, and the update adds k * v'[m]. So one
// kernel runs every (batch, kv head, m) as an independent work item (the OpenCL grid, the
// CPU's parallel loop) that walks the T steps sequentially, keeping its column in the state
// buffer (present_state itself when that has the compute type, else a scratch buffer copied
// out at the end), and writes output column m of the head's query heads at every step.
#include <cmath>

#include "CompositeUtil.h"
#include "NNLowering.h"

namespace nnc::lower {

namespace {

using kir::Expr;
using kir::Stmt;
using Kernels = std::vector<kir::Kernel>;
using nnl::i64;

/// f32 arithmetic (f64 for f64 inputs), as the interpreter's.
DType stateType(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}

Expected<Kernels> lowerLinearAttention(const Node &node, const std::string &prefix) {
  for (size_t i = 0; i < 3; ++i)
    NNC_TRY(composite::checkFloat(node, i, i == 0 ? "query" : i == 1 ? "key" : "value"));
  const Value *past = node.operand(3), *decay = node.operand(4), *beta = node.operand(5);
  Extents qe = extentsOf(node.operand(0)), ve = extentsOf(node.operand(2));
  const int64_t qHeads = node.getInt("q_num_heads"), kvHeads = node.getInt("kv_num_heads");
  if (qe.size() != 3 || ve.size() != 3 || qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads != 0)
    return node.error("query {} and value {} do not split into {} and {} heads", extentsStr(qe),
                      extentsStr(ve), qHeads, kvHeads);
  const int64_t batch = qe[0], steps = qe[1], dk = qe[2] / qHeads, dv = ve[2] / kvHeads;
  const int64_t group = qHeads / kvHeads;
  const int64_t decayWidth = decay ? extentsOf(decay).back() : 0;
  const int64_t betaWidth = beta ? extentsOf(beta).back() : 0;
  const DType t = node.operand(0)->dtype(), st = node.result(1)->dtype();
  const DType ct = stateType(t);
  double scale = node.getFloat("scale", 0.0);
  if (scale == 0.0)
    scale = 1.0 / std::sqrt(static_cast<double>(dk));
  if (batch * kvHeads * dk * dv == 0)
    return Kernels{nnl::emptyKernel(node, prefix)};

  KernelBuilder kb(node, prefix);
  int qb = kb.operand(0), kbuf = kb.operand(1), vb = kb.operand(2);
  int pb = past ? kb.operand(3) : -1, db = decay ? kb.operand(4) : -1,
      bb = beta ? kb.operand(5) : -1;
  int ob = kb.result(0), presentB = kb.result(1);
  bool inPlace = st == ct;
  int sb = inPlace ? presentB : kb.scratch(0, ct, batch * kvHeads * dk * dv);

  nnl::Nest outer;
  Expr b = outer.add(kb, batch, "b"), h = outer.add(kb, kvHeads, "h"), m = outer.add(kb, dv, "m");
  auto load = [&](int buf, Expr at) { return kir::cast(kb.load(buf, std::move(at)), ct); };
  // State element (d, m) of this work item's head.
  Expr head = kir::add(kir::mul(b, i64(kvHeads)), h);
  auto stateAt = [&](const Expr &d) {
    return kir::add(kir::mul(kir::add(kir::mul(head, i64(dk)), d), i64(dv)), m);
  };
  auto overD = [&](const std::function<Stmt(const Expr &)> &body) {
    std::string d = kb.freshName("d");
    return kir::forLoop(d, i64(dk), body(kir::var(d)));
  };

  std::vector<Stmt> body;
  body.push_back(overD([&](const Expr &d) {
    return kb.store(sb, stateAt(d), past ? load(pb, stateAt(d)) : nnl::fc(0, ct));
  }));

  std::string tn = kb.freshName("t");
  Expr tv = kir::var(tn);
  std::vector<Stmt> step;
  Expr row = kir::add(kir::mul(b, i64(steps)), tv);
  Expr kvRow = kir::add(kir::mul(row, i64(kvHeads)), h); // (row, h) of the [.., Hkv, ..] inputs
  auto keyAt = [&](const Expr &d) { return kir::add(kir::mul(kvRow, i64(dk)), d); };
  if (decay) {
    if (decayWidth == kvHeads && decayWidth != kvHeads * dk) {
      Expr g = kb.bind(step, "g", ct, kir::op(OpKind::Exp, {load(db, kvRow)}));
      step.push_back(overD([&](const Expr &d) {
        return kb.store(sb, stateAt(d), kir::mul(load(sb, stateAt(d)), g));
      }));
    } else {
      step.push_back(overD([&](const Expr &d) {
        Expr g = kir::op(OpKind::Exp, {load(db, keyAt(d))});
        return kb.store(sb, stateAt(d), kir::mul(load(sb, stateAt(d)), g));
      }));
    }
  }
  Expr v = kb.bind(step, "v", ct, load(vb, kir::add(kir::mul(kvRow, i64(dv)), m)));
  if (beta) {
    std::string r = kb.freshName("r");
    step.push_back(kir::decl(r, ct, nnl::fc(0, ct)));
    step.push_back(overD([&](const Expr &d) {
      return kir::accumulate(
          r, kir::add(kir::var(r, ct), kir::mul(load(sb, stateAt(d)), load(kbuf, keyAt(d)))));
    }));
    Expr bt = load(bb, betaWidth == 1 ? row : kir::add(kir::mul(row, i64(betaWidth)), h));
    v = kb.bind(step, "v", ct, kir::mul(bt, kir::sub(v, kir::var(r, ct))));
  }
  step.push_back(overD([&](const Expr &d) {
    return kb.store(sb, stateAt(d),
                    kir::add(load(sb, stateAt(d)), kir::mul(load(kbuf, keyAt(d)), v)));
  }));
  // The query heads of this kv head (a loop of one statement per head; none for one).
  std::string jn = group > 1 ? kb.freshName("j") : "";
  Expr hq = kir::add(kir::mul(h, i64(group)), group > 1 ? kir::var(jn) : i64(0));
  Expr qRow = kir::add(kir::mul(row, i64(qHeads)), hq);
  std::string acc = kb.freshName("acc");
  std::vector<Stmt> read;
  read.push_back(kir::decl(acc, ct, nnl::fc(0, ct)));
  read.push_back(overD([&](const Expr &d) {
    Expr qd = load(qb, kir::add(kir::mul(qRow, i64(dk)), d));
    return kir::accumulate(acc, kir::add(kir::var(acc, ct), kir::mul(qd, load(sb, stateAt(d)))));
  }));
  Expr y = kir::mul(nnl::fc(scale, ct), kir::var(acc, ct));
  read.push_back(kb.store(ob, kir::add(kir::mul(qRow, i64(dv)), m), composite::narrow(y, t)));
  step.push_back(group > 1 ? kir::forLoop(jn, i64(group), kir::block(read)) : kir::block(read));
  body.push_back(kir::forLoop(tn, i64(steps), kir::block(step)));
  if (!inPlace)
    body.push_back(overD([&](const Expr &d) {
      return kb.store(presentB, stateAt(d), composite::narrow(load(sb, stateAt(d)), st));
    }));
  int64_t work = batch * kvHeads * dv * std::max<int64_t>(steps, 1) * dk * (3 + group);
  return Kernels{kb.finish(outer.wrap(kir::block(body)), nnl::parallelOuter(outer, work))};
}

} // namespace

void registerLinearAttentionLowerer(LowererTable &t) {
  t[OpKind::LinearAttention] = lowerLinearAttention;
}

} // namespace nnc::lower
