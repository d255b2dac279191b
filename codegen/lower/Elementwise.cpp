// Lowerers of the elementwise ops (every NNC_ELEMENTWISE entry of Ops.def, numpy
// broadcasting) and of `cast`: one kernel, one loop nest over the (collapsed) output.
#include "LowerUtil.h"
#include "Lowerers.h"

namespace nnc::lower {

namespace {

/// One kernel: out0[i] = f(in0[bcast(i)], in1[bcast(i)], ...) over the result's extents.
/// With `valueTypes`, the buffers and loads have the values' own dtypes (storage-only ones
/// included: a byte per element, as the executable binds them) rather than movedType.
Expected<std::vector<kir::Kernel>>
mapKernel(const Node &node, const std::string &prefix,
          const std::function<kir::Expr(const std::vector<kir::Expr> &)> &f,
          bool valueTypes = false) {
  KernelBuilder b(node, prefix);
  Extents out = extentsOf(node.result(0));
  std::vector<Extents> ins;
  for (size_t k = 0; k < node.numOperands(); ++k)
    ins.push_back(extentsOf(node.operand(k)));
  Collapsed c = collapse(out, ins);
  std::vector<int> bufs;
  for (size_t k = 0; k < ins.size(); ++k)
    bufs.push_back(b.operand(k));
  int ob = b.result(0);
  std::vector<std::string> loops;
  kir::Stmt body = b.loopNest(
      c.out,
      [&](const std::vector<kir::Expr> &idx) {
        std::vector<kir::Expr> args;
        for (size_t k = 0; k < ins.size(); ++k) {
          kir::Expr index = broadcastIndex(idx, c.in[k]);
          args.push_back(valueTypes ? kir::load(bufs[k], node.operand(k)->dtype(), index)
                                    : b.load(bufs[k], index));
        }
        return b.store(ob, flatIndex(idx, stridesOf(c.out)), f(args));
      },
      &loops);
  kir::Kernel k = b.finish(body, defaultSchedule(loops, c.out));
  if (valueTypes) {
    for (size_t i = 0; i < ins.size(); ++i)
      k.buffers[bufs[i]].dtype = node.operand(i)->dtype();
    k.buffers[ob].dtype = node.result(0)->dtype();
  }
  return std::vector<kir::Kernel>{std::move(k)};
}

Expected<std::vector<kir::Kernel>> lowerElementwise(const Node &node, const std::string &prefix) {
  const OpInfo &info = node.info();
  if (static_cast<int>(node.numOperands()) != info.arity)
    return node.error("expects {} operands, got {}", info.arity, node.numOperands());
  for (size_t k = 0; k < node.numOperands(); ++k) {
    if (!node.operand(k))
      return node.error("operand {} is missing", k);
    DType t = node.operand(k)->dtype();
    bool ok = node.kind() == OpKind::Select && k == 0 ? t == DType::Bool
                                                      : typeClassAccepts(info.operandTypes, t);
    if (!ok || isStorageOnly(t))
      return node.error("operand {} has dtype {}, which code generation does not support", k,
                        dtypeName(t));
  }
  OpKind kind = node.kind();
  return mapKernel(node, prefix,
                   [kind](const std::vector<kir::Expr> &args) { return kir::op(kind, args); });
}

/// Cast (ONNX rules, runtime/interp/Cast.cpp), storage-only dtypes included: their buffers
/// hold one byte per element and the kernel IR cast converts them with the node's `saturate`
/// (f8 targets) and `round_mode` (f8e8m0 target) options.
Expected<std::vector<kir::Kernel>> lowerCast(const Node &node, const std::string &prefix) {
  if (node.numOperands() != 1 || !node.operand(0))
    return node.error("expects 1 operand");
  DType from = node.operand(0)->dtype(), to = node.result(0)->dtype();
  if (from == to)
    return mapKernel(
        node, prefix, [](const std::vector<kir::Expr> &a) { return a[0]; },
        /*valueTypes=*/true);
  bool saturate = node.getInt("saturate", 1) != 0;
  std::string roundMode = node.getString("round_mode", "up");
  if (roundMode != "up" && roundMode != "down" && roundMode != "nearest")
    return node.error("round_mode must be up, down or nearest, got '{}'", roundMode);
  return mapKernel(
      node, prefix,
      [=](const std::vector<kir::Expr> &a) { return kir::cast(a[0], to, saturate, roundMode); },
      /*valueTypes=*/true);
}

} // namespace

void registerElementwiseLowerers(LowererTable &t) {
#define NNC_ELEMENTWISE(Id, ...) t[OpKind::Id] = lowerElementwise;
#include "nnc/ir/Ops.def"
  t[OpKind::Cast] = lowerCast;
}

} // namespace nnc::lower
