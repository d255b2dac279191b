// The C-style printer of the kernel IR that every C-like emitter shares (STYLE.md point 7):
// expressions, statements, scalar semantics and the helper functions they need. A dialect
// (OpenCL C) overrides type names, buffer access for the 16-bit float formats and the
// kernel's signature; everything else is printed here, with the exact scalar semantics of
// the LLVM emitter (codegen/llvm/Emitter.cpp) and the interpreter.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nnc/ir/Kernel.h"

namespace nnc::cgen {

class CPrinter {
public:
  virtual ~CPrinter() = default;

  /// Prints `body` (the kernel's loop nest with its schedule applied) as the statements of a
  /// function body, at `indent` spaces. Fails naming the kernel for what it cannot print.
  Expected<std::string> printBody(const kir::Kernel &k, const kir::Stmt &body, int indent);

  /// The helper functions the printed code calls, in dependency order.
  std::string helpers() const;
  /// True when printed code or its helpers use double precision.
  bool usesDouble() const { return usesDouble_; }

  /// The C identifier of a kernel variable (loop variable or local).
  static std::string varName(const std::string &name);

protected:
  // ---- Dialect hooks ----
  /// The type values of `t` are computed in (float for f16/bf16, a byte for storage formats).
  virtual std::string computeType(DType t);
  /// The element type of a buffer of `t` in memory.
  virtual std::string storageType(DType t);
  /// Reads element `index` of buffer `buf` (of `t`) as a compute value.
  virtual std::string loadElement(DType t, const std::string &buf, const std::string &index);
  /// Writes compute value `value` to element `index` of `buf`.
  virtual std::string storeElement(DType t, const std::string &buf, const std::string &index,
                                   const std::string &value);
  /// The bits of a float as an unsigned 32-bit value and back (function names).
  virtual std::string floatAsUint() = 0;
  virtual std::string uintAsFloat() = 0;
  /// The bits of `v` as `to` (a same-width float or integer type: Kernel.h's BitCast).
  virtual std::string bitCast(const std::string &v, DType to) = 0;
  /// The name of math function `name` ("exp") for values of `t` (C: expf for float).
  virtual std::string mathFn(const char *name, DType t);
  /// Defines a helper named `name` (once) with the given code.
  void need(const std::string &name, const std::string &code);
  /// The helper that rounds a float to f16 precision (as float).
  virtual std::string roundF16Helper() = 0;

  /// A work-group barrier (C has none: the default fails).
  virtual std::string barrierStmt();
  /// Declares `lanes` (locals of t) as consecutive elements of `buf` from `index` with one
  /// vector load, or returns "" for the printer to load them one by one.
  virtual std::string vectorLoad(DType t, const std::vector<std::string> &lanes,
                                 const std::string &buf, const std::string &index);
  /// Stores `values` (of t) to consecutive elements of `buf` from `index` with one vector
  /// store, or "" (one by one).
  virtual std::string vectorStore(DType t, const std::vector<std::string> &values,
                                  const std::string &buf, const std::string &index);
  /// The body of a GemmTile `t` on buffers `a`, `b` and `c` with explicit vector types, given
  /// the locals gt_a, gt_b, gt_c (offsets) and gt_k (k extent) at `pad`; or "" for the
  /// scalar loop nest.
  virtual std::string gemmTileVectors(const kir::GemmTileShape &t, const std::string &a,
                                      const std::string &b, const std::string &c,
                                      const std::string &pad);

  /// The identifier of buffer i (a parameter or a local buffer) of the kernel being printed.
  std::string bufferName(int i) const;

  std::string fail(const std::string &msg);
  const kir::Kernel *k_ = nullptr;
  bool usesDouble_ = false;

private:
  std::string expr(const kir::Expr &e);
  std::string opExpr(const kir::ExprNode &e);
  /// Kernel.h's Convert (the machine conversion: the expansion has guarded its operand).
  std::string convertExpr(const std::string &v, DType from, DType to);
  std::string storageCast(const std::string &v, DType from, const kir::ExprNode &e);
  std::string roundTo(DType t, const std::string &v);
  std::string literal(double v, DType t);
  std::string intLiteral(int64_t v, DType t);
  void stmt(const kir::Stmt &s, int indent, std::string &out);

  // Helpers, generated on first use; each returns its name.
  std::string roundBf16Helper();
  std::string roundF64Helper(DType to);
  std::string storageHelper(bool encode, DType t);

  std::vector<std::pair<std::string, std::string>> helpers_;
  std::set<std::string> helperNames_;
  std::optional<std::string> error_;
};

} // namespace nnc::cgen
