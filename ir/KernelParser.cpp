// The kernel-IR parser: a recursive-descent parser, over the lexer of TextSyntax.h in its
// kernel syntax, for the grammar in KernelPrinter.cpp. Every malformed input gives
// "FILE:LINE:COL: message". Nodes are built as written (no folding), so that printing a
// parsed kernel gives back the text it came from.
#include "nnc/ir/KernelParser.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "KernelCheck.h"
#include "KernelImmediate.h"
#include "TextSyntax.h"

namespace nnc::kir {

namespace {

using text::Tok;
using text::Token;

/// Deeper nesting of expressions or statements is refused rather than risking the stack.
constexpr int kMaxDepth = 512;

class KernelParser {
public:
  KernelParser(std::string_view src, std::string file)
      : lexer_(src, text::Lexer::Syntax::Kernel), file_(std::move(file)) {
    advance();
  }

  Expected<std::vector<Kernel>> parse() {
    std::vector<Kernel> kernels;
    do {
      kernels.emplace_back();
      NNC_TRY(parseKernel(kernels.back()));
    } while (tok_.kind != Tok::Eof);
    return kernels;
  }

private:
  // ---- Helpers ------------------------------------------------------------------------------
  void advance() { tok_ = lexer_.next(); }
  Error errorAt(const Token &t, const std::string &msg) const {
    return makeError("{}:{}:{}: {}", file_, t.line, t.col, t.kind == Tok::Bad ? t.text : msg);
  }
  Error expected(const std::string &what) const {
    return errorAt(tok_, fmt::format("expected {}, got {}", what, text::describe(tok_)));
  }
  bool isPunct(std::string_view p) const { return tok_.kind == Tok::Punct && tok_.text == p; }
  bool isKeyword(std::string_view k) const { return tok_.kind == Tok::Ident && tok_.text == k; }
  bool isName() const { return tok_.kind == Tok::Ident || tok_.kind == Tok::String; }
  bool consumePunct(std::string_view p) {
    if (!isPunct(p))
      return false;
    advance();
    return true;
  }
  Error expectPunct(std::string_view p) {
    if (consumePunct(p))
      return Error::success();
    return expected(fmt::format("'{}'", p));
  }
  Error expectKeyword(std::string_view k) {
    if (!isKeyword(k))
      return expected(fmt::format("'{}'", k));
    advance();
    return Error::success();
  }
  Expected<std::string> parseName(const char *what) {
    if (!isName() || tok_.text.empty())
      return expected(what);
    std::string n = tok_.text;
    advance();
    return n;
  }
  Expected<int64_t> parseInt(const char *what) {
    if (tok_.kind != Tok::Number || text::looksFloat(tok_.text))
      return expected(what);
    bool neg;
    uint64_t mag;
    if (!text::parseIntText(tok_.text, neg, mag) || (!neg && mag > uint64_t(INT64_MAX)) ||
        (neg && mag > uint64_t(INT64_MAX) + 1))
      return errorAt(tok_, fmt::format("malformed or out-of-range integer {}", tok_.text));
    advance();
    return neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
  }
  Expected<DType> parseDTypeName() {
    if (tok_.kind != Tok::Ident)
      return expected("a dtype");
    std::optional<DType> t = parseDType(tok_.text);
    if (!t)
      return errorAt(tok_, fmt::format("unknown dtype '{}'", tok_.text));
    advance();
    return *t;
  }

  static Expr make(ExprNode n) { return std::make_shared<const ExprNode>(std::move(n)); }
  static Stmt makeStmt(StmtKind kind) {
    auto s = std::make_shared<StmtNode>();
    s->kind = kind;
    return s;
  }

  /// Guards recursion: a scope object per nested expression or statement.
  struct Nest {
    int &depth;
    explicit Nest(int &d) : depth(++d) {}
    ~Nest() { --depth; }
  };
  Error tooDeep() const { return errorAt(tok_, "expressions or statements nest too deeply"); }

  // ---- Kernels ------------------------------------------------------------------------------
  Error parseKernel(Kernel &k) {
    k_ = &k;
    buffers_.clear();
    scope_.clear();
    NNC_TRY(expectKeyword("kernel"));
    Token nameTok = tok_;
    NNC_ASSIGN_OR_RETURN(k.name, parseName("a kernel name"));
    // The backends name their functions after it (an OpenCL C kernel, an LLVM function).
    bool identifier = text::isIdentStart(k.name[0]);
    for (char c : k.name)
      identifier = identifier && text::isNameChar(c) && c != '.';
    if (!identifier)
      return errorAt(nameTok, fmt::format("kernel name '{}' is not a C identifier", k.name));
    if (!kernelNames_.insert(k.name).second)
      return errorAt(nameTok, fmt::format("a kernel named '{}' is already defined", k.name));
    NNC_TRY(expectPunct("("));
    inPlaceNames_.clear();
    if (!consumePunct(")")) {
      do {
        NNC_TRY(parseBuffer(k));
      } while (consumePunct(","));
      NNC_TRY(expectPunct(")"));
    }
    // in_place names parameters, which may come after the one that names them.
    for (const auto &[b, at] : inPlaceNames_) {
      auto it = buffers_.find(at.text);
      if (it == buffers_.end())
        return errorAt(at, fmt::format("unknown buffer '{}'", at.text));
      k.buffers[b].inPlaceOver.push_back(it->second);
    }
    NNC_TRY(expectPunct("{"));
    while (isKeyword("local")) {
      advance();
      Token at = tok_;
      LocalBuffer l;
      NNC_ASSIGN_OR_RETURN(l.name, parseName("a local buffer name"));
      NNC_TRY(expectPunct(":"));
      NNC_ASSIGN_OR_RETURN(l.dtype, parseDTypeName());
      NNC_TRY(expectPunct("["));
      NNC_ASSIGN_OR_RETURN(l.numElements, parseInt("an element count"));
      NNC_TRY(expectPunct("]"));
      NNC_TRY(declareBuffer(at, l.name, kLocalBufferBase + static_cast<int>(k.locals.size())));
      k.locals.push_back(std::move(l));
    }
    NNC_ASSIGN_OR_RETURN(k.body, parseBlockRest());
    if (isKeyword("schedule")) {
      advance();
      NNC_TRY(expectPunct(":"));
      do {
        NNC_TRY(parseStep(k.schedule));
      } while (consumePunct(";"));
    }
    if (isKeyword("flops")) {
      advance();
      NNC_TRY(expectPunct(":"));
      Token at = tok_;
      if (tok_.kind != Tok::Number)
        return expected("a number of flops");
      const char *b = at.text.data(), *e = b + at.text.size();
      auto r = std::from_chars(b, e, k.flops);
      if (r.ec != std::errc() || r.ptr != e || !std::isfinite(k.flops) || k.flops < 0)
        return errorAt(at, fmt::format("malformed number of flops '{}'", at.text));
      advance();
      for (GemmElems e : {GemmElems::U8S8S32, GemmElems::BF16})
        if (isKeyword(gemmElemsName(e))) {
          k.flopsElems = e;
          advance();
        }
    }
    return Error::success();
  }

  Error declareBuffer(const Token &at, const std::string &name, int index) {
    if (!buffers_.emplace(name, index).second)
      return errorAt(at, fmt::format("buffer '{}' is declared twice", name));
    return Error::success();
  }

  Error parseBuffer(Kernel &k) {
    Token at = tok_;
    BufferDecl d{};
    NNC_ASSIGN_OR_RETURN(d.name, parseName("a buffer name"));
    NNC_TRY(expectPunct(":"));
    NNC_ASSIGN_OR_RETURN(d.dtype, parseDTypeName());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(d.numElements, parseInt("an element count"));
    NNC_TRY(expectPunct("]"));
    static const std::pair<const char *, BufferRole> kRoles[] = {{"operand", BufferRole::Operand},
                                                                 {"result", BufferRole::Result},
                                                                 {"scratch", BufferRole::Scratch},
                                                                 {"extent", BufferRole::Extent},
                                                                 {"status", BufferRole::Status}};
    bool found = false;
    for (const auto &[word, role] : kRoles)
      if (isKeyword(word)) {
        d.role = role;
        found = true;
      }
    if (!found)
      return expected("a buffer role (operand, result, scratch, extent or status)");
    advance();
    NNC_ASSIGN_OR_RETURN(int64_t index, parseInt("the role's index"));
    if (index < 0 || index > INT32_MAX)
      return errorAt(at, fmt::format("buffer '{}' has role index {}", d.name, index));
    d.index = static_cast<int>(index);
    d.written = isKeyword("written");
    if (d.written)
      advance();
    d.perThread = isKeyword("per_thread");
    if (d.perThread)
      advance();
    if (isKeyword("in_place")) {
      advance();
      NNC_TRY(expectPunct("("));
      do {
        if (!isName())
          return expected("a buffer name");
        inPlaceNames_.push_back({k.buffers.size(), tok_});
        advance();
      } while (consumePunct(","));
      NNC_TRY(expectPunct(")"));
    }
    // A status buffer holds two i64 per runtime check (Kernel::checks). The checks' messages
    // name the node they came from and are not part of the text (kernels of different nodes
    // print alike), so a parsed kernel gets one generic message per check.
    if (d.role == BufferRole::Status && d.numElements % 2 == 0)
      for (int64_t c = 0; c < d.numElements / 2; ++c)
        k.checks.push_back(
            {fmt::format("kernel {}: runtime check {} failed on the value ", k.name, c), ""});
    NNC_TRY(declareBuffer(at, d.name, static_cast<int>(k.buffers.size())));
    k.buffers.push_back(std::move(d));
    return Error::success();
  }

  Error parseStep(Schedule &sched) {
    Token at = tok_;
    if (tok_.kind != Tok::Ident)
      return expected("a schedule step");
    static const std::pair<const char *, ScheduleStep::Kind> kSteps[] = {
        {"split", ScheduleStep::Split},
        {"reorder", ScheduleStep::Reorder},
        {"vectorize", ScheduleStep::Vectorize},
        {"unroll", ScheduleStep::Unroll},
        {"parallel", ScheduleStep::Parallel},
        {"gpu_blocks", ScheduleStep::GpuBlocks},
        {"gpu_threads", ScheduleStep::GpuThreads},
        {"gpu_grid", ScheduleStep::GpuGrid}};
    ScheduleStep step{};
    bool found = false;
    for (const auto &[word, kind] : kSteps)
      if (tok_.text == word) {
        step.kind = kind;
        found = true;
      }
    if (!found)
      return errorAt(at, fmt::format("unknown schedule step '{}'", tok_.text));
    advance();
    NNC_TRY(expectPunct("("));
    if (step.kind == ScheduleStep::Reorder || step.kind == ScheduleStep::GpuGrid) {
      do {
        NNC_ASSIGN_OR_RETURN(std::string loop, parseName("a loop name"));
        step.loops.push_back(std::move(loop));
      } while (consumePunct(","));
    } else {
      NNC_ASSIGN_OR_RETURN(step.loop, parseName("a loop name"));
      if (step.kind == ScheduleStep::Split || step.kind == ScheduleStep::GpuBlocks ||
          step.kind == ScheduleStep::GpuThreads) {
        NNC_TRY(expectPunct(","));
        NNC_ASSIGN_OR_RETURN(
            step.factor,
            parseInt(step.kind == ScheduleStep::Split ? "a split factor" : "an NDRange dimension"));
      }
    }
    NNC_TRY(expectPunct(")"));
    sched.steps.push_back(std::move(step));
    return Error::success();
  }

  // ---- Statements ---------------------------------------------------------------------------
  /// `{ stmt* }` as the body of a loop, an if branch or the kernel: its one statement, or a
  /// block of them. Locals declared in it go out of scope at the '}'.
  Expected<Stmt> parseBlockBody() {
    NNC_TRY(expectPunct("{"));
    return parseBlockRest();
  }

  /// The statements of a block up to its '}' (the '{' read).
  Expected<Stmt> parseBlockRest() {
    size_t mark = scope_.size();
    std::vector<Stmt> stmts;
    while (!consumePunct("}")) {
      if (tok_.kind == Tok::Eof || tok_.kind == Tok::Bad)
        return expected("a statement or '}'");
      NNC_ASSIGN_OR_RETURN(Stmt s, parseStmt());
      stmts.push_back(std::move(s));
    }
    scope_.resize(mark);
    if (stmts.size() == 1)
      return stmts[0];
    Stmt b = makeStmt(StmtKind::Block);
    b->body = std::move(stmts);
    return b;
  }

  Expected<Stmt> parseStmt() {
    Nest nest(depth_);
    if (depth_ > kMaxDepth)
      return tooDeep();
    if (isPunct("{")) {
      // A nested block: always a Block (its locals' scope ends with it).
      NNC_ASSIGN_OR_RETURN(Stmt inner, parseBlockBody());
      if (inner->kind == StmtKind::Block)
        return inner;
      Stmt b = makeStmt(StmtKind::Block);
      b->body = {std::move(inner)};
      return b;
    }
    if (isKeyword("for"))
      return parseFor();
    if (isKeyword("var"))
      return parseVar();
    if (isKeyword("if")) {
      advance();
      Stmt s = makeStmt(StmtKind::If);
      NNC_ASSIGN_OR_RETURN(s->value, parseExpr());
      NNC_ASSIGN_OR_RETURN(Stmt then, parseBlockBody());
      Stmt otherwise;
      if (isKeyword("else")) {
        advance();
        NNC_ASSIGN_OR_RETURN(otherwise, parseBlockBody());
      }
      s->body = {std::move(then), std::move(otherwise)};
      return s;
    }
    if (isKeyword("barrier")) {
      advance();
      return makeStmt(StmtKind::Barrier);
    }
    if (isKeyword("prefetch")) {
      Token at = tok_;
      advance();
      if (isPunct("[")) // a store to a buffer named prefetch
        return parseStore(at, "prefetch");
      Stmt s = makeStmt(StmtKind::Prefetch);
      if (!isName())
        return expected("a buffer after 'prefetch'");
      Token name = tok_;
      advance();
      if (name.kind == Tok::Ident && name.text == "write" && !isPunct("[")) {
        s->write = true; // `prefetch write buf[...]` (not a buffer named write)
        if (!isName())
          return expected("a buffer after 'prefetch write'");
        name = tok_;
        advance();
      }
      auto b = buffers_.find(name.text);
      if (b == buffers_.end())
        return errorAt(name, fmt::format("unknown buffer '{}'", name.text));
      s->buffer = b->second;
      NNC_TRY(expectPunct("["));
      NNC_ASSIGN_OR_RETURN(s->index, parseExpr());
      NNC_TRY(expectPunct("]"));
      return s;
    }
    if (isKeyword("gemm_tile"))
      return parseGemmTile();
    if (isKeyword("conv_tile"))
      return parseConvTile();
    if (!isName())
      return expected("a statement");
    Token at = tok_;
    std::string name = tok_.text;
    advance();
    if (isPunct("["))
      return parseStore(at, name);
    if (!isPunct("="))
      return expected("'[' or '=' after a name that starts a statement");
    advance();
    Stmt s = makeStmt(StmtKind::Assign);
    s->name = name;
    if (isKeyword("reassoc")) {
      advance();
      s->reassociate = true;
      if (consumePunct(",")) {
        NNC_TRY(expectKeyword("ignore_nan"));
        s->ignoresNaN = true;
      }
    }
    NNC_ASSIGN_OR_RETURN(s->value, parseExpr());
    s->type = s->value->type;
    return s;
  }

  Expected<Stmt> parseFor() {
    advance();
    Stmt s = makeStmt(StmtKind::For);
    NNC_ASSIGN_OR_RETURN(s->name, parseName("a loop variable"));
    NNC_TRY(expectKeyword("in"));
    Token zero = tok_;
    NNC_ASSIGN_OR_RETURN(int64_t start, parseInt("0 (loops start at 0)"));
    if (start != 0)
      return errorAt(zero, fmt::format("loops start at 0, not {}", start));
    NNC_TRY(expectPunct(".."));
    NNC_ASSIGN_OR_RETURN(s->extent, parseExpr());
    if (tok_.kind == Tok::Ident && tok_.text != "independent") {
      static const LoopKind kKinds[] = {
          LoopKind::Serial,   LoopKind::Parallel,  LoopKind::Vectorized, LoopKind::Unrolled,
          LoopKind::GpuBlock, LoopKind::GpuThread, LoopKind::Scalar};
      bool found = false;
      for (LoopKind k : kKinds)
        if (tok_.text == loopKindName(k)) {
          s->loopKind = k;
          found = true;
        }
      if (!found)
        return errorAt(tok_, fmt::format("unknown loop kind '{}'", tok_.text));
      advance();
      if ((s->loopKind == LoopKind::GpuBlock || s->loopKind == LoopKind::GpuThread) &&
          consumePunct("(")) {
        Token axisTok = tok_;
        NNC_ASSIGN_OR_RETURN(int64_t axis, parseInt("an NDRange dimension"));
        if (axis < INT32_MIN || axis > INT32_MAX)
          return errorAt(axisTok, fmt::format("NDRange dimension {} is out of range", axis));
        s->gpuAxis = static_cast<int>(axis);
        NNC_TRY(expectPunct(")"));
      }
    }
    if (isKeyword("independent")) {
      advance();
      s->independent = true;
    }
    scope_.push_back({s->name, DType::I64});
    NNC_ASSIGN_OR_RETURN(Stmt body, parseBlockBody());
    scope_.pop_back();
    s->body = {std::move(body)};
    return s;
  }

  Expected<Stmt> parseVar() {
    advance();
    if (consumePunct("(")) {
      // var (a, b): f32x2 = buf[index..+2]
      Stmt s = makeStmt(StmtKind::VecLoad);
      do {
        NNC_ASSIGN_OR_RETURN(std::string n, parseName("a lane's local name"));
        s->names.push_back(std::move(n));
      } while (consumePunct(","));
      NNC_TRY(expectPunct(")"));
      NNC_TRY(expectPunct(":"));
      Token typeTok = tok_;
      size_t x = tok_.kind == Tok::Ident ? tok_.text.rfind('x') : std::string::npos;
      std::optional<DType> t =
          x == std::string::npos ? std::nullopt : parseDType(tok_.text.substr(0, x));
      bool neg;
      uint64_t lanes = 0;
      if (!t || !text::parseIntText(tok_.text.substr(x + 1), neg, lanes) || neg)
        return expected("a vector type such as f32x4");
      if (lanes != s->names.size())
        return errorAt(typeTok, fmt::format("{} has {} lanes but {} locals are declared", tok_.text,
                                            lanes, s->names.size()));
      s->type = *t;
      advance();
      NNC_TRY(expectPunct("="));
      NNC_ASSIGN_OR_RETURN(s->buffer, parseBufferRef());
      NNC_TRY(expectPunct("["));
      NNC_ASSIGN_OR_RETURN(s->index, parseExpr());
      NNC_TRY(parseLanes(s->names.size()));
      NNC_TRY(expectPunct("]"));
      for (const std::string &n : s->names)
        scope_.push_back({n, s->type});
      return s;
    }
    Stmt s = makeStmt(StmtKind::Decl);
    NNC_ASSIGN_OR_RETURN(s->name, parseName("a local name"));
    NNC_TRY(expectPunct(":"));
    NNC_ASSIGN_OR_RETURN(s->type, parseDTypeName());
    NNC_TRY(expectPunct("="));
    NNC_ASSIGN_OR_RETURN(s->value, parseExpr());
    // In scope after its initializer, as the verifier and the backends have it.
    scope_.push_back({s->name, s->type});
    return s;
  }

  /// `..+N` after a vector access's index, N the number of lanes.
  Error parseLanes(size_t lanes) {
    NNC_TRY(expectPunct(".."));
    NNC_TRY(expectPunct("+"));
    Token at = tok_;
    NNC_ASSIGN_OR_RETURN(int64_t n, parseInt("the number of lanes"));
    if (n < 0 || static_cast<uint64_t>(n) != lanes)
      return errorAt(at, fmt::format("the access spans {} lanes but has {}", n, lanes));
    return Error::success();
  }

  Expected<Stmt> parseStore(const Token &at, const std::string &name) {
    auto b = buffers_.find(name);
    if (b == buffers_.end())
      return errorAt(at, fmt::format("unknown buffer '{}'", name));
    advance(); // '['
    Expr index;
    NNC_ASSIGN_OR_RETURN(index, parseExpr());
    if (isPunct("..")) {
      // buf[index..+N] = (v0, ..., vN-1)
      Token lanesAt = tok_;
      advance();
      NNC_TRY(expectPunct("+"));
      NNC_ASSIGN_OR_RETURN(int64_t n, parseInt("the number of lanes"));
      NNC_TRY(expectPunct("]"));
      NNC_TRY(expectPunct("="));
      NNC_TRY(expectPunct("("));
      Stmt s = makeStmt(StmtKind::VecStore);
      s->buffer = b->second;
      s->index = std::move(index);
      do {
        NNC_ASSIGN_OR_RETURN(Expr v, parseExpr());
        s->args.push_back(std::move(v));
      } while (consumePunct(","));
      NNC_TRY(expectPunct(")"));
      if (n < 0 || static_cast<uint64_t>(n) != s->args.size())
        return errorAt(
            lanesAt, fmt::format("the store spans {} lanes but has {} values", n, s->args.size()));
      return s;
    }
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectPunct("="));
    Stmt s = makeStmt(StmtKind::Store);
    s->buffer = b->second;
    s->index = std::move(index);
    NNC_ASSIGN_OR_RETURN(s->value, parseExpr());
    return s;
  }

  Expected<int> parseBufferRef() {
    Token at = tok_;
    NNC_ASSIGN_OR_RETURN(std::string name, parseName("a buffer name"));
    auto b = buffers_.find(name);
    if (b == buffers_.end())
      return errorAt(at, fmt::format("unknown buffer '{}'", name));
    return b->second;
  }

  /// `name value` (a keyword and an integer) of a GEMM tile's operand.
  Error parseParam(const char *word, int64_t &out) {
    NNC_TRY(expectKeyword(word));
    NNC_ASSIGN_OR_RETURN(out, parseInt(word));
    return Error::success();
  }

  // gemm_tile [u8s8s32 | bf16] MRxNR C[c; ldc L] (= | +=) A[a; lda L, ak L] * B[b; ldb L[, prefetch
  // +P[ row k >> S]]] over k < KC[ sums every S]
  Expected<Stmt> parseGemmTile() {
    advance();
    Stmt s = makeStmt(StmtKind::GemmTile);
    GemmTileShape &t = s->tile;
    for (GemmElems e : {GemmElems::U8S8S32, GemmElems::BF16})
      if (isKeyword(gemmElemsName(e))) {
        t.elems = e;
        advance();
      }
    size_t x = tok_.kind == Tok::Number ? tok_.text.find('x') : std::string::npos;
    bool negM, negN;
    uint64_t mr, nr;
    if (x == std::string::npos || !text::parseIntText(tok_.text.substr(0, x), negM, mr) ||
        !text::parseIntText(tok_.text.substr(x + 1), negN, nr) || negM || negN ||
        mr > uint64_t(INT64_MAX) || nr > uint64_t(INT64_MAX))
      return expected("a tile size such as 4x16");
    t.mr = static_cast<int64_t>(mr);
    t.nr = static_cast<int64_t>(nr);
    advance();
    s->args.resize(4);
    NNC_ASSIGN_OR_RETURN(s->buffer, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(s->args[2], parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("ldc", t.ldc));
    NNC_TRY(expectPunct("]"));
    t.accumulate = consumePunct("+");
    NNC_TRY(expectPunct("="));
    NNC_ASSIGN_OR_RETURN(t.a, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(s->args[0], parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("lda", t.lda));
    NNC_TRY(expectPunct(","));
    NNC_TRY(parseParam("ak", t.ak));
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectPunct("*"));
    NNC_ASSIGN_OR_RETURN(t.b, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(s->args[1], parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("ldb", t.ldb));
    if (consumePunct(",")) {
      NNC_TRY(expectKeyword("prefetch"));
      NNC_TRY(expectPunct("+"));
      NNC_ASSIGN_OR_RETURN(t.prefetchB, parseInt("a prefetch offset"));
      if (isKeyword("row")) {
        advance();
        NNC_TRY(expectKeyword("k"));
        NNC_TRY(expectPunct(">>"));
        Token at = tok_;
        NNC_ASSIGN_OR_RETURN(int64_t shift, parseInt("a prefetch shift"));
        if (shift < INT32_MIN || shift > INT32_MAX)
          return errorAt(at, fmt::format("prefetch shift {} is out of range", shift));
        t.prefetchShift = static_cast<int>(shift);
      }
    }
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectKeyword("over"));
    NNC_TRY(expectKeyword("k"));
    NNC_TRY(expectPunct("<"));
    NNC_ASSIGN_OR_RETURN(s->args[3], parseExpr());
    if (isKeyword("sums")) {
      advance();
      NNC_TRY(expectKeyword("every"));
      NNC_ASSIGN_OR_RETURN(t.sumEvery, parseInt("the k steps of a run of partial sums"));
    }
    return s;
  }

  // conv_tile [depthwise] COLSxBLOCKSxLANES C[c; col L, blk L] = [I[i; col L, blk L] +]
  // X[x; col L] * W[w; blk L] over (N0; x S, w S), (N1; ...), (N2; ...), (N3; ...)
  // [columns (LO, HI), ...] [sums every N]
  Expected<Stmt> parseConvTile() {
    advance();
    Stmt s = makeStmt(StmtKind::ConvTile);
    ConvTileShape &t = s->conv;
    if (isKeyword(gemmElemsName(GemmElems::BF16))) {
      t.elems = GemmElems::BF16;
      advance();
    }
    if (isKeyword("depthwise")) {
      t.depthwise = true;
      advance();
    }
    int64_t sizes[3];
    std::string text = tok_.kind == Tok::Number ? tok_.text : std::string();
    for (int i = 0; i < 3; ++i) {
      size_t x = i < 2 ? text.find('x') : text.size();
      bool neg;
      uint64_t v;
      if (x == std::string::npos || !text::parseIntText(text.substr(0, x), neg, v) || neg ||
          v > uint64_t(INT64_MAX))
        return expected("a conv tile size such as 4x2x16");
      sizes[i] = static_cast<int64_t>(v);
      text = i < 2 ? text.substr(x + 1) : std::string();
    }
    t.cols = sizes[0];
    t.blocks = sizes[1];
    t.lanes = sizes[2];
    advance();
    s->args.resize(8);
    NNC_ASSIGN_OR_RETURN(s->buffer, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(s->args[2], parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("col", t.ccol));
    NNC_TRY(expectPunct(","));
    NNC_TRY(parseParam("blk", t.cblk));
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectPunct("="));
    NNC_ASSIGN_OR_RETURN(int first, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(Expr firstOff, parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("col", t.xcol));
    if (consumePunct(",")) {
      // The initial values' operand; X follows.
      t.init = first;
      s->args[3] = std::move(firstOff);
      t.icol = t.xcol;
      NNC_TRY(parseParam("blk", t.iblk));
      NNC_TRY(expectPunct("]"));
      NNC_TRY(expectPunct("+"));
      NNC_ASSIGN_OR_RETURN(t.x, parseBufferRef());
      NNC_TRY(expectPunct("["));
      NNC_ASSIGN_OR_RETURN(s->args[0], parseExpr());
      NNC_TRY(expectPunct(";"));
      NNC_TRY(parseParam("col", t.xcol));
    } else {
      t.x = first;
      s->args[0] = std::move(firstOff);
      s->args[3] = intImm(0);
    }
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectPunct("*"));
    NNC_ASSIGN_OR_RETURN(t.w, parseBufferRef());
    NNC_TRY(expectPunct("["));
    NNC_ASSIGN_OR_RETURN(s->args[1], parseExpr());
    NNC_TRY(expectPunct(";"));
    NNC_TRY(parseParam("blk", t.wblk));
    NNC_TRY(expectPunct("]"));
    NNC_TRY(expectKeyword("over"));
    for (int d = 0; d < 4; ++d) {
      if (d)
        NNC_TRY(expectPunct(","));
      NNC_TRY(expectPunct("("));
      NNC_ASSIGN_OR_RETURN(s->args[4 + d], parseExpr());
      NNC_TRY(expectPunct(";"));
      NNC_TRY(parseParam("x", t.xs[d]));
      NNC_TRY(expectPunct(","));
      NNC_TRY(parseParam("w", t.ws[d]));
      NNC_TRY(expectPunct(")"));
    }
    if (isKeyword("columns")) {
      advance();
      do {
        std::array<int64_t, 2> w{};
        NNC_TRY(expectPunct("("));
        NNC_ASSIGN_OR_RETURN(w[0], parseInt("a window's first column"));
        NNC_TRY(expectPunct(","));
        NNC_ASSIGN_OR_RETURN(w[1], parseInt("a window's end column"));
        NNC_TRY(expectPunct(")"));
        t.kwCols.push_back(w);
      } while (consumePunct(","));
    }
    if (isKeyword("sums")) {
      advance();
      NNC_TRY(expectKeyword("every"));
      NNC_ASSIGN_OR_RETURN(t.sumEvery, parseInt("the steps of a run of partial sums"));
    }
    return s;
  }

  // ---- Expressions --------------------------------------------------------------------------
  /// The infix operator at the current token: its precedence (higher binds tighter; 0 when the
  /// token is none) and op.
  int infixAt(OpKind &kind) const {
    if (tok_.kind != Tok::Punct)
      return 0;
    static const struct {
      const char *text;
      int prec;
      OpKind kind;
    } kInfix[] = {
        {"||", 1, OpKind::Or},           {"&&", 2, OpKind::And},       {"==", 3, OpKind::Equal},
        {"<", 4, OpKind::Less},          {"<=", 4, OpKind::LessEqual}, {">", 4, OpKind::Greater},
        {">=", 4, OpKind::GreaterEqual}, {"+", 5, OpKind::Add},        {"-", 5, OpKind::Sub},
        {"*", 6, OpKind::Mul},           {"/", 6, OpKind::Div},        {"%", 6, OpKind::Mod}};
    for (const auto &op : kInfix)
      if (tok_.text == op.text) {
        kind = op.kind;
        return op.prec;
      }
    return 0;
  }

  /// An Op node of `kind` on `args`, typed by the op's rule; fails at `at` when they do not fit.
  Expected<Expr> makeOp(const Token &at, OpKind kind, std::vector<Expr> args, bool strict) {
    DType result = DType::I64;
    std::string problem = checkOp(kind, args, result);
    if (!problem.empty())
      return errorAt(at, problem);
    ExprNode n;
    n.kind = ExprKind::Op;
    n.type = result;
    n.op = kind;
    n.args = std::move(args);
    n.strict = strict;
    return make(std::move(n));
  }

  /// Precedence climbing: operands joined by infix operators binding at least `minPrec`.
  Expected<Expr> parseExpr(int minPrec = 1) {
    Nest nest(depth_);
    if (depth_ > kMaxDepth)
      return tooDeep();
    NNC_ASSIGN_OR_RETURN(Expr lhs, parsePrimary());
    for (;;) {
      OpKind kind;
      int prec = infixAt(kind);
      if (prec == 0 || prec < minPrec)
        return lhs;
      Token at = tok_;
      advance();
      NNC_ASSIGN_OR_RETURN(Expr rhs, parseExpr(prec + 1));
      NNC_ASSIGN_OR_RETURN(lhs, makeOp(at, kind, {std::move(lhs), std::move(rhs)}, false));
    }
  }

  Expected<std::vector<Expr>> parseArgs() {
    std::vector<Expr> args;
    NNC_TRY(expectPunct("("));
    if (consumePunct(")"))
      return args;
    do {
      NNC_ASSIGN_OR_RETURN(Expr a, parseExpr());
      args.push_back(std::move(a));
    } while (consumePunct(","));
    NNC_TRY(expectPunct(")"));
    return args;
  }

  Expected<Expr> parsePrimary() {
    if (tok_.kind == Tok::Number) {
      Token at = tok_;
      advance();
      return kernelImmediate(at, file_);
    }
    if (consumePunct("(")) {
      NNC_ASSIGN_OR_RETURN(Expr e, parseExpr());
      NNC_TRY(expectPunct(")"));
      return e;
    }
    if (isKeyword("true") || isKeyword("false")) {
      ExprNode n;
      n.kind = ExprKind::IntImm;
      n.type = DType::Bool;
      n.intValue = tok_.text == "true";
      advance();
      return make(std::move(n));
    }
    if (!isName())
      return expected("an expression");
    Token at = tok_;
    std::string name = tok_.text;
    bool bare = tok_.kind == Tok::Ident;
    advance();
    if (bare && (name == "cast" || name == "bitcast" || name == "convert") && isPunct("<"))
      return parseCast(name == "bitcast"   ? ExprKind::BitCast
                       : name == "convert" ? ExprKind::Convert
                                           : ExprKind::Cast);
    if (bare && isPunct("("))
      return parseCall(at, name);
    if (isPunct("[")) {
      auto b = buffers_.find(name);
      if (b == buffers_.end())
        return errorAt(at, fmt::format("unknown buffer '{}'", name));
      advance();
      ExprNode n;
      n.kind = ExprKind::Load;
      n.buffer = b->second;
      n.type = k_->bufferType(b->second);
      NNC_ASSIGN_OR_RETURN(Expr index, parseExpr());
      n.args = {std::move(index)};
      NNC_TRY(expectPunct("]"));
      return make(std::move(n));
    }
    for (size_t i = scope_.size(); i-- > 0;)
      if (scope_[i].first == name) {
        ExprNode n;
        n.kind = ExprKind::Var;
        n.name = name;
        n.type = scope_[i].second;
        return make(std::move(n));
      }
    return errorAt(at, fmt::format("'{}' is not a loop variable or local in scope", name));
  }

  /// cast<dtype[, saturate=0|1][, round_mode=MODE]>(e), bitcast<dtype>(e) or
  /// convert<dtype>(e).
  Expected<Expr> parseCast(ExprKind kind) {
    advance(); // '<'
    ExprNode n;
    n.kind = kind;
    bool bits = kind != ExprKind::Cast; // no options
    NNC_ASSIGN_OR_RETURN(n.type, parseDTypeName());
    while (!bits && consumePunct(",")) {
      if (isKeyword("saturate")) {
        advance();
        NNC_TRY(expectPunct("="));
        Token at = tok_;
        NNC_ASSIGN_OR_RETURN(int64_t v, parseInt("0 or 1"));
        if (v != 0 && v != 1)
          return errorAt(at, fmt::format("saturate must be 0 or 1, not {}", v));
        n.saturate = v == 1;
      } else if (isKeyword("round_mode")) {
        advance();
        NNC_TRY(expectPunct("="));
        NNC_ASSIGN_OR_RETURN(n.roundMode, parseName("a round mode"));
        if (n.roundMode == "up")
          n.roundMode.clear(); // the default, as kir::cast holds it
      } else {
        return expected("saturate or round_mode");
      }
    }
    NNC_TRY(expectPunct(">"));
    NNC_TRY(expectPunct("("));
    NNC_ASSIGN_OR_RETURN(Expr arg, parseExpr());
    NNC_TRY(expectPunct(")"));
    n.args = {std::move(arg)};
    return make(std::move(n));
  }

  /// `name(args)`: fma, rem, quot, shl, shr, libm.FN or an elementwise op, optionally
  /// `.strict`.
  Expected<Expr> parseCall(const Token &at, std::string name) {
    NNC_ASSIGN_OR_RETURN(std::vector<Expr> args, parseArgs());
    bool strict = name.size() > 7 && name.compare(name.size() - 7, 7, ".strict") == 0;
    if (strict)
      name.resize(name.size() - 7);
    auto primitive = [&](ExprKind kind, size_t arity) -> Expected<Expr> {
      if (args.size() != arity)
        return errorAt(at, fmt::format("'{}' takes {} operands, got {}", name, arity, args.size()));
      ExprNode n;
      n.kind = kind;
      n.type = args[0]->type;
      n.strict = strict;
      if (kind == ExprKind::Call)
        n.name = name.substr(5);
      n.args = std::move(args);
      return make(std::move(n));
    };
    if (name == "fma")
      return primitive(ExprKind::Fma, 3);
    // Only ops and fma are strict: `rem.strict` is looked up as an op (and is none).
    if (!strict && name == "rem")
      return primitive(ExprKind::Rem, 2);
    if (!strict && name == "quot")
      return primitive(ExprKind::Quot, 2);
    if (!strict && name == "shl")
      return primitive(ExprKind::Shl, 2);
    if (!strict && name == "shr")
      return primitive(ExprKind::Shr, 2);
    if (!strict && name.rfind("libm.", 0) == 0) {
      for (const MathFunction &m : kMathFunctions)
        if (name.substr(5) == m.name)
          return primitive(ExprKind::Call, static_cast<size_t>(m.arity));
      return errorAt(at, fmt::format("unknown math function '{}'", name.substr(5)));
    }
    std::optional<OpKind> kind = lookupOp(name);
    if (!kind)
      return errorAt(at, fmt::format("unknown op '{}'", name));
    return makeOp(at, *kind, std::move(args), strict);
  }

  text::Lexer lexer_;
  std::string file_;
  Token tok_;
  Kernel *k_ = nullptr;
  std::set<std::string> kernelNames_;
  std::map<std::string, int> buffers_;               ///< Parameters and locals by name.
  std::vector<std::pair<std::string, DType>> scope_; ///< Loop variables and locals.
  /// The names in the parameters' in_place lists: (parameter, name), resolved after the list.
  std::vector<std::pair<size_t, Token>> inPlaceNames_;
  int depth_ = 0;
};

} // namespace

Expected<std::vector<Kernel>> parseKernels(std::string_view text, const std::string &filename) {
  KernelParser p(text, filename);
  return p.parse();
}

Expected<std::vector<Kernel>> parseKernelFile(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::string text, text::readTextFile(path));
  return parseKernels(text, path);
}

} // namespace nnc::kir
