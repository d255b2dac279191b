// The kernel-level IR's text form (printKernel, printStmt, printExpr) and kernel signatures.
// KernelParser.cpp reads it back: every field of a kernel is in it, except the messages of its
// runtime checks (they name the node, and kernels of different nodes must print alike for the
// JIT's de-duplication); a parsed kernel has one generic message per check of its status
// buffer (two i64 each).
//
//   kernel  ::= 'kernel' name '(' buffer,* ')' '{' local* stmt* '}' ['schedule:' step (';' step)*]
//               ['flops:' number ['u8s8s32' | 'bf16']]
//   buffer  ::= name ':' dtype '[' int ']' role int ['written'] ['per_thread']
//               ['in_place' '(' name,* ')']
//   role    ::= 'operand' | 'result' | 'scratch' | 'extent' | 'status'
//   local   ::= 'local' name ':' dtype '[' int ']'
//   stmt    ::= 'for' name 'in' '0..' expr [kind ['(' axis ')']] ['independent'] '{' stmt* '}'
//             | name '[' expr ']' '=' expr                          (store)
//             | name '[' expr '..+' N ']' '=' '(' expr,* ')'        (vector store)
//             | 'var' name ':' dtype '=' expr                       (local)
//             | 'var' '(' name,* ')' ':' dtype 'x' N '=' name '[' expr '..+' N ']'
//             | name ('=' | '=reassoc' | '=reassoc,ignore_nan') expr  (assignment)
//             | 'if' expr '{' stmt* '}' ['else' '{' stmt* '}']
//             | 'barrier' | '{' stmt* '}'
//             | 'gemm_tile' MR'x'NR c '[' expr '; ldc' int ']' ['+'] '=' a '[' expr '; lda' int
//               ', ak' int ']' '*' b '[' expr '; ldb' int [', prefetch +' int [' row k >>' int]]
//               ']' 'over k <' expr
//             | 'conv_tile' ['depthwise'] COLS'x'BLOCKS'x'LANES c '[' expr '; col' int ', blk' int
//               ']' '=' [i '[' expr '; col' int ', blk' int ']' '+'] x '[' expr '; col' int ']'
//               '*' w '[' expr '; blk' int ']' 'over' ('(' expr '; x' int ', w' int ')'),4
//               ['columns' ('(' int ',' int ')'),+] ['sums every' int]
//   expr    ::= expr infix expr | op['.strict'] '(' expr,* ')' | 'fma'['.strict'] '(' ... ')'
//             | ('rem' | 'quot' | 'shl' | 'shr') '(' ... ')' | 'libm.' fn '(' ... ')'
//             | ('cast' | 'bitcast' | 'convert') '<' dtype opts '>' '(' expr ')'
//             | name '[' expr ']' | name | immediate | '(' expr ')'
// Immediates carry their dtype (`3i32`, `0.5f32`, `inff64`) except i64 (`3`) and bool
// (`true`). A nested operand of an infix operator is parenthesized, so the text never
// depends on precedence. Names are bare identifiers, else quoted (TextSyntax.h), as are names
// that read as keywords. The braces of a loop, an if or the kernel are its block; a block
// nested in a block prints its own braces when it declares locals (their scope ends there),
// else its statements print in place.
#include "nnc/ir/Kernel.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "TextSyntax.h"

namespace nnc::kir {

namespace {

struct Printer {
  const Kernel *kernel = nullptr;
  bool anonymous = false; ///< Buffers as b0, b1, ... (signatures).

  std::string bufferName(int b) const {
    if (isLocalBuffer(b) && (anonymous || !kernel || !kernel->hasBuffer(b)))
      return fmt::format("local{}", b - kLocalBufferBase);
    if (anonymous || !kernel || !kernel->hasBuffer(b))
      return fmt::format("b{}", b);
    return text::kernelName(kernel->bufferName(b));
  }

  static const char *infix(OpKind k) {
    switch (k) {
    case OpKind::Add: return "+";
    case OpKind::Sub: return "-";
    case OpKind::Mul: return "*";
    case OpKind::Div: return "/";
    case OpKind::Mod: return "%";
    case OpKind::Less: return "<";
    case OpKind::LessEqual: return "<=";
    case OpKind::Greater: return ">";
    case OpKind::GreaterEqual: return ">=";
    case OpKind::Equal: return "==";
    case OpKind::And: return "&&";
    case OpKind::Or: return "||";
    default: return nullptr;
    }
  }

  static std::string floatText(double v, DType t) {
    std::string s;
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    uint64_t signBit = uint64_t(1) << 63;
    if (std::isnan(v) && (bits & ~signBit) == text::kCanonicalNaN64)
      s = bits & signBit ? "-nan" : "nan";
    else if (std::isnan(v))
      s = fmt::format("nan:0x{:016x}", bits); // 16 digits: the dtype suffix follows
    else if (std::isinf(v))
      s = v < 0 ? "-inf" : "inf";
    else {
      s = t == DType::F64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
      if (s.find_first_of(".e") == std::string::npos)
        s += ".0";
    }
    return s + std::string(dtypeName(t));
  }

  std::string call(const std::string &name, const std::vector<Expr> &args) const {
    std::string s = name + "(";
    for (size_t k = 0; k < args.size(); ++k)
      s += (k ? ", " : "") + expr(args[k]);
    return s + ")";
  }

  std::string expr(const Expr &e, bool nested = false) const {
    if (!e)
      return "<null>";
    switch (e->kind) {
    case ExprKind::IntImm:
      if (e->type == DType::Bool)
        return e->intValue ? "true" : "false";
      if (e->type == DType::I64)
        return fmt::format("{}", e->intValue);
      if (e->type == DType::U64)
        return fmt::format("{}u64", static_cast<uint64_t>(e->intValue));
      return fmt::format("{}{}", e->intValue, dtypeName(e->type));
    case ExprKind::FloatImm: return floatText(e->floatValue, e->type);
    case ExprKind::Var:
      return text::kernelName(e->name);
    case ExprKind::Load:
      return fmt::format("{}[{}]", bufferName(e->buffer), e->args.empty() ? "?" : expr(e->args[0]));
    case ExprKind::Cast: {
      std::string opts;
      if (!e->saturate)
        opts += ", saturate=0";
      if (!e->roundMode.empty() && e->roundMode != "up")
        opts += ", round_mode=" + e->roundMode;
      return fmt::format("cast<{}{}>({})", dtypeName(e->type), opts,
                         e->args.empty() ? "?" : expr(e->args[0]));
    }
    case ExprKind::Op: {
      const char *in = infix(e->op);
      if (in && e->args.size() == 2 && !e->strict) {
        std::string s = expr(e->args[0], true) + " " + in + " " + expr(e->args[1], true);
        return nested ? "(" + s + ")" : s;
      }
      return call(std::string(opInfo(e->op).name) + (e->strict ? ".strict" : ""), e->args);
    }
    case ExprKind::BitCast:
      return fmt::format("bitcast<{}>({})", dtypeName(e->type),
                         e->args.empty() ? "?" : expr(e->args[0]));
    case ExprKind::Fma:
      return call(e->strict ? "fma.strict" : "fma", e->args);
    case ExprKind::Rem:
      return call("rem", e->args);
    case ExprKind::Quot:
      return call("quot", e->args);
    case ExprKind::Shl:
      return call("shl", e->args);
    case ExprKind::Shr:
      return call("shr", e->args);
    case ExprKind::Convert:
      return fmt::format("convert<{}>({})", dtypeName(e->type),
                         e->args.empty() ? "?" : expr(e->args[0]));
    case ExprKind::Call:
      return call("libm." + e->name, e->args);
    }
    return "?";
  }

  /// True when block `s` itself declares locals, whose scope ends with it.
  static bool declaresLocals(const StmtNode &s) {
    for (const Stmt &b : s.body)
      if (b && (b->kind == StmtKind::Decl || b->kind == StmtKind::VecLoad))
        return true;
    return false;
  }

  /// `s` at `indent`; `inBlock`: s is a statement of a block (not the one statement of a
  /// loop, an if branch or the kernel, whose braces already delimit a block).
  void stmt(const Stmt &s, int indent, std::string &out, bool inBlock = false) const {
    std::string pad(indent * 2, ' ');
    if (!s) {
      out += pad + "<null>\n";
      return;
    }
    switch (s->kind) {
    case StmtKind::For:
      out += fmt::format("{}for {} in 0..{}{}{}{}{} {{\n", pad, text::kernelName(s->name),
                         expr(s->extent), s->loopKind == LoopKind::Serial ? "" : " ",
                         s->loopKind == LoopKind::Serial ? "" : loopKindName(s->loopKind),
                         s->loopKind == LoopKind::GpuBlock || s->loopKind == LoopKind::GpuThread
                             ? fmt::format("({})", s->gpuAxis)
                             : "",
                         s->independent ? " independent" : "");
      for (const Stmt &b : s->body)
        stmt(b, indent + 1, out);
      out += pad + "}\n";
      return;
    case StmtKind::Store:
      out += fmt::format("{}{}[{}] = {}\n", pad, bufferName(s->buffer), expr(s->index),
                         expr(s->value));
      return;
    case StmtKind::Decl:
      out += fmt::format("{}var {}: {} = {}\n", pad, text::kernelName(s->name), dtypeName(s->type),
                         expr(s->value));
      return;
    case StmtKind::Assign:
      out += fmt::format("{}{} {} {}\n", pad, text::kernelName(s->name),
                         s->ignoresNaN    ? "=reassoc,ignore_nan"
                         : s->reassociate ? "=reassoc"
                                          : "=",
                         expr(s->value));
      return;
    case StmtKind::If:
      out += fmt::format("{}if {} {{\n", pad, expr(s->value));
      if (!s->body.empty())
        stmt(s->body[0], indent + 1, out);
      if (s->body.size() > 1 && s->body[1]) {
        out += pad + "} else {\n";
        stmt(s->body[1], indent + 1, out);
      }
      out += pad + "}\n";
      return;
    case StmtKind::Block:
      if (inBlock && declaresLocals(*s)) {
        out += pad + "{\n";
        for (const Stmt &b : s->body)
          stmt(b, indent + 1, out, true);
        out += pad + "}\n";
        return;
      }
      for (const Stmt &b : s->body)
        stmt(b, indent, out, true);
      return;
    case StmtKind::Barrier:
      out += pad + "barrier\n";
      return;
    case StmtKind::Prefetch:
      out += fmt::format("{}prefetch {}{}[{}]\n", pad, s->write ? "write " : "",
                         bufferName(s->buffer), expr(s->index));
      return;
    case StmtKind::VecLoad: {
      std::string names;
      for (size_t l = 0; l < s->names.size(); ++l)
        names += (l ? ", " : "") + text::kernelName(s->names[l]);
      out += fmt::format("{}var ({}): {}x{} = {}[{}..+{}]\n", pad, names, dtypeName(s->type),
                         s->names.size(), bufferName(s->buffer), expr(s->index), s->names.size());
      return;
    }
    case StmtKind::VecStore: {
      std::string values;
      for (size_t l = 0; l < s->args.size(); ++l)
        values += (l ? ", " : "") + expr(s->args[l]);
      out += fmt::format("{}{}[{}..+{}] = ({})\n", pad, bufferName(s->buffer), expr(s->index),
                         s->args.size(), values);
      return;
    }
    case StmtKind::ConvTile: {
      const ConvTileShape &t = s->conv;
      std::string dims;
      for (int d = 0; d < 4; ++d)
        dims += fmt::format("{}({}; x {}, w {})", d ? ", " : "", expr(s->args[4 + d]), t.xs[d],
                            t.ws[d]);
      if (!t.kwCols.empty()) {
        dims += " columns";
        for (size_t i = 0; i < t.kwCols.size(); ++i)
          dims += fmt::format("{} ({}, {})", i ? "," : "", t.kwCols[i][0], t.kwCols[i][1]);
      }
      if (t.sumEvery > 0)
        dims += fmt::format(" sums every {}", t.sumEvery);
      out += fmt::format(
          "{}conv_tile {}{}{}x{}x{} {}[{}; col {}, blk {}] = {}{}[{}; col {}] * {}[{}; blk {}] "
          "over {}\n",
          pad, t.elems == GemmElems::F32 ? "" : fmt::format("{} ", gemmElemsName(t.elems)),
          t.depthwise ? "depthwise " : "", t.cols, t.blocks, t.lanes, bufferName(s->buffer),
          expr(s->args[2]), t.ccol, t.cblk,
          t.init >= 0 ? fmt::format("{}[{}; col {}, blk {}] + ", bufferName(t.init),
                                    expr(s->args[3]), t.icol, t.iblk)
                      : std::string(),
          bufferName(t.x), expr(s->args[0]), t.xcol, bufferName(t.w), expr(s->args[1]), t.wblk,
          dims);
      return;
    }
    case StmtKind::GemmTile: {
      const GemmTileShape &t = s->tile;
      out += fmt::format(
          "{}gemm_tile {}{}x{} {}[{}; ldc {}] {}= {}[{}; lda {}, ak {}] * "
          "{}[{}; ldb {}{}] over k < {}{}\n",
          pad, t.elems == GemmElems::F32 ? std::string() : std::string(gemmElemsName(t.elems)) + " ", t.mr, t.nr, bufferName(s->buffer), expr(s->args[2]), t.ldc, t.accumulate ? "+" : "",
          bufferName(t.a), expr(s->args[0]), t.lda, t.ak, bufferName(t.b), expr(s->args[1]), t.ldb,
          t.prefetchB ? fmt::format(", prefetch +{}{}", t.prefetchB,
                                    t.prefetchShift ? fmt::format(" row k >> {}", t.prefetchShift)
                                                    : std::string())
                      : "",
          expr(s->args[3]),
          t.sumEvery > 0 ? fmt::format(" sums every {}", t.sumEvery) : std::string());
      return;
    }
    }
  }

  static const char *roleName(BufferRole r) {
    switch (r) {
    case BufferRole::Operand: return "operand";
    case BufferRole::Result: return "result";
    case BufferRole::Scratch: return "scratch";
    case BufferRole::Extent: return "extent";
    case BufferRole::Status: return "status";
    }
    return "?";
  }

  std::string kernelText(const Kernel &k) const {
    std::string out =
        fmt::format("kernel {}(", anonymous ? std::string("_") : text::kernelName(k.name));
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      const BufferDecl &d = k.buffers[b];
      out += fmt::format("{}{}: {}[{}] {} {}{}{}", b ? ", " : "", bufferName(static_cast<int>(b)),
                         dtypeName(d.dtype), d.numElements, roleName(d.role), d.index,
                         d.written ? " written" : "", d.perThread ? " per_thread" : "");
      if (!d.inPlaceOver.empty()) {
        std::vector<std::string> over;
        for (int o : d.inPlaceOver)
          over.push_back(bufferName(o));
        out += fmt::format(" in_place({})", fmt::join(over, ", "));
      }
    }
    out += ") {\n";
    for (size_t l = 0; l < k.locals.size(); ++l)
      out += fmt::format("  local {}: {}[{}]\n", bufferName(kLocalBufferBase + static_cast<int>(l)),
                         dtypeName(k.locals[l].dtype), k.locals[l].numElements);
    stmt(k.body, 1, out);
    out += "}\n";
    if (!k.schedule.steps.empty())
      out += "schedule: " + k.schedule.str() + "\n";
    if (k.flops != 0)
      out += fmt::format("flops: {}{}\n", k.flops,
                         k.flopsElems == GemmElems::F32
                             ? std::string()
                             : std::string(" ") + gemmElemsName(k.flopsElems));
    return out;
  }
};

} // namespace

std::string printExpr(const Expr &e) { return Printer().expr(e); }

std::string printStmt(const Stmt &s, int indent) {
  std::string out;
  Printer().stmt(s, indent, out);
  return out;
}

std::string printKernel(const Kernel &k) {
  Printer p;
  p.kernel = &k;
  return p.kernelText(k);
}

std::string Kernel::signature() const {
  Printer p;
  p.kernel = this;
  p.anonymous = true;
  return p.kernelText(*this);
}

} // namespace nnc::kir
