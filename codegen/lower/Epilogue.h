// A fusion group's epilogue (ir/FusionGroup.h): the elementwise members that turn the value a
// group's anchor (matmul, conv) computes for one result element into the group's result there.
// It is built once per group from the group analysis and handed to the anchor's kernel template
// (tuning::LowerOptions::epilogue), which calls it where it writes a final element; the
// planner (Fusion.cpp) runs it as a pass of its own after a template with no place for it
// (KernelTemplate::takesEpilogue in Templates.h).
//
// What an element's epilogue sees: the element's flat index in the group's result, the value
// the anchor computed there (`acc`, whatever its type: the members convert it as their formulas
// say), and the group's inputs, which it loads through the kernel's own buffers (an input that is
// also the anchor's operand shares the anchor's buffer). An input of one element (a scalar
// constant: a relu's 0, GELU's sqrt(2)) is read once into a local that the caller places before
// its loop. An input of the output channel's extents (a per-channel scale or zero point) is read
// at the channel index the flat index gives.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "LowerUtil.h"

namespace nnc::lower {

class Epilogue {
public:
  /// How one place in a kernel reads the group's inputs: the kernel's buffer of group input k
  /// (declared on first use), a load from a buffer, and the scalar inputs already read into
  /// locals there (each scalar is read once per place).
  struct Inputs {
    std::function<int(size_t input)> buffer;
    std::function<kir::Expr(int buffer, kir::Expr index)> load;
    std::map<size_t, kir::Expr> scalars;
  };

  /// The epilogue of group `u` (members and an anchor, an attention group's softmax, or a
  /// group without either, whose members compose into one loop nest). Fails, naming the
  /// member, on an operand dtype that fused code generation does not support or an operand
  /// that does not broadcast to the group's result.
  static Expected<std::unique_ptr<Epilogue>> of(const LoweringUnit &u);

  const LoweringUnit &unit() const { return u_; }
  /// The value the members compute from: the root's result, or an attention group's scores
  /// (the softmax operand).
  const Value *value() const;
  /// The collapsed iteration space of that value and of each input read by a member (same
  /// rank; Collapsed::in in the order of slotOf).
  const Collapsed &space() const { return space_; }
  /// The position of group input k in space().in (-1: no member reads it).
  int slotOf(size_t k) const { return leafSlot_[k]; }
  /// True when a composition reads group input k only at the element it computes (the input
  /// has the value's extents, so leafValue loads it at that element's own index).
  bool readsOnlyAtElement(size_t k) const;
  /// The dtype (movedType) of the group's result and its element count.
  DType resultType() const;
  int64_t numElements() const;
  /// True when a template may apply the epilogue at its own final stores: the group has an
  /// anchor (no softmax). (Otherwise the members run as a pass after the anchor.)
  bool appliesAtStores() const;
  /// True when the members change the anchor's dtype (an integer accumulator requantized to
  /// u8). Only a template that declares it (KernelTemplate::convertsEpilogue) takes such an
  /// epilogue: its result buffer (resultBuffer) then has the group's dtype, and it stores the
  /// final values where it would store the anchor's. Otherwise the anchor accumulates in a
  /// scratch buffer and the members run as a pass from it.
  bool changesType() const;
  /// The group's result as a buffer of a kernel that `kb` builds for the anchor: result 0 of
  /// resultType() and numElements(). A template that applies the epilogue declares its
  /// result with it instead of KernelBuilder::result.
  int resultBuffer(KernelBuilder &kb) const;

  /// The declaration of group input k as a kernel buffer ("in<k>", role Operand, index k).
  kir::BufferDecl inputBuffer(size_t k) const;
  /// The inputs of a kernel that `kb` builds for the anchor: an input that is an anchor operand
  /// is kb.operand(d); another is declared with index (anchor operands + k), which
  /// renumberOperands() maps back to k once the kernel is built.
  Inputs inputsOf(KernelBuilder &kb) const;
  /// The buffers (inputsOf) of the group inputs read only at the element computed
  /// (readsOnlyAtElement: a residual), whose lines a template may prefetch ahead of the
  /// epilogue that reads them.
  std::vector<int> elementInputBuffers(KernelBuilder &kb) const;
  /// Gives the operand buffers of a kernel built for the anchor the group's numbering.
  void renumberOperands(kir::Kernel &k) const;

  /// The value of the group's value() where the anchor's value is `anchorValue` and group input
  /// k is `leaf(k)`; locals of member values used more than once are named `<prefix><n>` and
  /// appended to `decls`.
  kir::Expr compose(const std::string &prefix, const std::function<kir::Expr(size_t)> &leaf,
                    kir::Expr anchorValue, std::vector<kir::Stmt> &decls) const;
  /// The value of group input k for a composition: a scalar input is read once into the local
  /// `local` declared in `hoisted`, any other is loaded at indexOf(its collapsed extents).
  kir::Expr leafValue(size_t k, const std::string &local, Inputs &in,
                      std::vector<kir::Stmt> &hoisted,
                      const std::function<kir::Expr(const Extents &)> &indexOf) const;
  /// The index of an input of collapsed extents `le` at flat result index `at` (simplified
  /// with the loop extents in `env`).
  kir::Expr leafIndexAt(const kir::Expr &at, const Extents &le, const LoopExtents &env) const;

  /// A fresh prefix "fz<n>_" for the locals of one element's epilogue (unique in the group's
  /// kernels).
  std::string freshPrefix() { return "fz" + std::to_string(next_++) + "_"; }

  /// The group's result at the element of flat index `at` whose anchor value is `acc`:
  /// declares `<p>a = acc` and the members' locals in `stmts` (p a fresh prefix), scalar inputs
  /// in `hoisted`, and returns the final value.
  kir::Expr apply(const kir::Expr &at, const kir::Expr &acc, const LoopExtents &env, Inputs &in,
                  std::vector<kir::Stmt> &stmts, std::vector<kir::Stmt> &hoisted);

  /// Final stores of result elements (flat index, anchor value) that a template writes one
  /// after another into buffer `b` (a register tile's), appended to `out`. They go in chunks of
  /// one vector register's elements (`chunk`): each chunk computes its final values first, then
  /// stores them, so loads of the group's inputs never follow a store of their chunk that
  /// might alias them, and the SLP vectorizer still turns each chunk into vector code. (All of
  /// a tile's values first, up to 2 x 14 x 16 on AVX-512, left LLVM more live vectors than
  /// registers: it spilled and shuffled RegNet-Y's fused 1x1 convs, a third of their unfused
  /// speed.)
  void storeFinal(int b, const std::vector<std::pair<kir::Expr, kir::Expr>> &elements,
                  int64_t chunk, Inputs &in, std::vector<kir::Stmt> &out,
                  std::vector<kir::Stmt> &hoisted);
  /// A vector store of consecutive final elements at `at` (a GPU tile's vstoreN): each lane's
  /// epilogue, then the vector store of the finished lanes, appended to `out`.
  void vecStoreFinal(int b, const kir::Expr &at, const std::vector<kir::Expr> &lanes, Inputs &in,
                     std::vector<kir::Stmt> &out, std::vector<kir::Stmt> &hoisted);
  /// The elements per chunk of storeFinal for `cpu`: one vector register of the result dtype.
  int64_t chunkFor(const CpuTarget &cpu) const;

  /// The group's result at element (row, col) of the result seen as a [rows, cols] matrix (cols
  /// a product of its trailing extents) whose anchor value is `acc`: apply() at the flat index
  /// row * cols + col, declaring `row` and `col` as locals, so that the leaves' indices simplify
  /// knowing their ranges (a per-channel input is read at row % channels, not at a division of
  /// the flat index per element).
  kir::Expr applyAt(const kir::Expr &row, const kir::Expr &col, int64_t rows, int64_t cols,
                    const kir::Expr &acc, Inputs &in, std::vector<kir::Stmt> &stmts,
                    std::vector<kir::Stmt> &hoisted);
  /// A statement that finishes, in place, an element of the result of a kernel that `kb` builds
  /// once the anchor's value there is complete: element (row, col) of the result seen as a
  /// [rows, cols] matrix is read from the kernel's result buffer, and its final value stored
  /// back (GemmOperands::finish; a template whose stores accumulate, after an element's last
  /// one). Group inputs are read through `kb` (inputsOf); scalar inputs once per call, into
  /// that call's `hoisted`, which the caller places before its loop of these statements.
  using InPlace =
      std::function<kir::Stmt(kir::Expr row, kir::Expr col, std::vector<kir::Stmt> &hoisted)>;
  InPlace inPlace(KernelBuilder &kb, int64_t rows, int64_t cols);
  /// As inPlace, but the anchor's value at (row, col) is read from buffer `src` at `srcAt`
  /// (a template that keeps its sums in scratch of the anchor's dtype and stores only the
  /// final values: a group whose root narrows the dtype, as a cast to bf16 does).
  using FromScratch = std::function<kir::Stmt(kir::Expr row, kir::Expr col, int src,
                                              kir::Expr srcAt, std::vector<kir::Stmt> &hoisted)>;
  FromScratch fromScratch(KernelBuilder &kb, int64_t rows, int64_t cols);

  /// Called by a template that applied the epilogue at every final store of the anchor's
  /// result: the planner then adds no pass of its own.
  void markApplied() { applied_ = true; }
  bool applied() const { return applied_; }

  /// The epilogue as a pass over the anchor's finished result: reads `src` (the anchor's
  /// values, of the anchor's dtype) and stores the final values into `dst` of `k`, row by row
  /// of the result's last dim (a leaf broadcast along rows, a bias, is then read at the column
  /// index, contiguously, instead of at a flat index modulo the row length). `hoistBefore`:
  /// the scalar inputs' locals go before the pass's loops (`*before`, which the caller places
  /// ahead of the pass) rather than inside them (a kernel that is the pass alone: on an OpenCL
  /// device its loops are the grid, and each work-item reads them). Returns the loop nest;
  /// its default schedule steps are appended to k.schedule.
  kir::Stmt pass(kir::Kernel &k, int src, int dst, std::vector<kir::Stmt> *before);

private:
  explicit Epilogue(const LoweringUnit &u) : u_(u) {}

  const LoweringUnit &u_;
  std::set<const Node *> members_;
  /// Uses of each member result inside the group (operand slots).
  std::map<const Value *, int> uses_;
  Collapsed space_;
  std::vector<int> leafSlot_;
  int next_ = 0;
  bool applied_ = false;
};

} // namespace nnc::lower
