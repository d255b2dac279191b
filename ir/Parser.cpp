// The text-IR parser: a recursive-descent parser, over the lexer of TextSyntax.h, for the
// grammar in ir/Printer.cpp. Every malformed input gives "FILE:LINE:COL: message".
#include "nnc/ir/Parser.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "TextSyntax.h"
#include "nnc/ir/Verifier.h"
#include "nnc/support/Float16.h"

namespace nnc {

namespace {

using text::charStr;
using text::describe;
using text::Tok;
using text::Token;

class Parser {
public:
  Parser(std::string_view src, std::string file) : lexer_(src), file_(std::move(file)) {
    advance();
  }

  Expected<std::unique_ptr<Graph>> parse();

private:
  /// One `graph @name(...) -> (...) { ... }`, the top-level one or a loop node's body.
  Expected<std::unique_ptr<Graph>> parseOneGraph();
  void advance() { tok_ = lexer_.next(); }

  // ---- Parser helpers ---------------------------------------------------------------------
  Error errorAt(const Token &t, const std::string &msg) const {
    return makeError("{}:{}:{}: {}", file_, t.line, t.col, t.kind == Tok::Bad ? t.text : msg);
  }
  Error expected(const std::string &what) const {
    return errorAt(tok_, fmt::format("expected {}, got {}", what, describe(tok_)));
  }
  bool isPunct(char c) const { return tok_.kind == Tok::Punct && tok_.text[0] == c; }
  bool isKeyword(std::string_view k) const { return tok_.kind == Tok::Ident && tok_.text == k; }
  bool consumePunct(char c) {
    if (!isPunct(c))
      return false;
    advance();
    return true;
  }
  Error expectPunct(char c) {
    if (consumePunct(c))
      return Error::success();
    return expected(fmt::format("'{}'", c));
  }
  Error expectKeyword(std::string_view k) {
    if (!isKeyword(k))
      return expected(fmt::format("'{}'", k));
    advance();
    return Error::success();
  }

  Error parseType(TensorType &out);
  Error parseValueRef(Value *&out, bool allowNone);
  Error parseNode();
  Error parseAttr(const OpInfo &info, AttrMap &attrs);
  Error parseTensor(Tensor &out);
  Error parseElement(const Token &t, DType dtype, void *dst);
  Expected<int64_t> intOf(const Token &t);
  Expected<double> doubleOf(const Token &t);

  text::Lexer lexer_;
  std::string file_;
  Token tok_;
  std::unique_ptr<Graph> g_;
};

Expected<int64_t> Parser::intOf(const Token &t) {
  bool neg;
  uint64_t mag;
  if (t.kind != Tok::Number)
    return errorAt(t, fmt::format("expected an integer, got {}", describe(t)));
  if (text::looksFloat(t.text))
    return errorAt(t, fmt::format("expected an integer, got {}", t.text));
  if (!text::parseIntText(t.text, neg, mag) || (!neg && mag > uint64_t(INT64_MAX)) ||
      (neg && mag > uint64_t(INT64_MAX) + 1))
    return errorAt(t, fmt::format("malformed or out-of-range integer {}", t.text));
  return neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
}

Expected<double> Parser::doubleOf(const Token &t) {
  if (t.kind != Tok::Number)
    return errorAt(t, fmt::format("expected a number, got {}", describe(t)));
  Expected<uint64_t> bits = text::floatBitsOf(t.text, DType::F64);
  if (!bits)
    return errorAt(t, bits.error().message());
  double d;
  std::memcpy(&d, &*bits, 8);
  return d;
}

// ---- Grammar ----------------------------------------------------------------------------

Error Parser::parseType(TensorType &out) {
  if (tok_.kind != Tok::Ident)
    return expected("a type such as f32[N,3]");
  std::optional<DType> dt = parseDType(tok_.text);
  if (!dt)
    return errorAt(tok_, fmt::format("unknown dtype '{}'", tok_.text));
  advance();
  out = TensorType(*dt, {});
  NNC_TRY(expectPunct('['));
  if (consumePunct(']'))
    return Error::success();
  for (;;) {
    if (tok_.kind == Tok::Number) {
      Expected<int64_t> v = intOf(tok_);
      if (!v)
        return v.takeError();
      if (*v < 0)
        return errorAt(tok_, fmt::format("negative dimension {}", *v));
      out.shape.push_back(Dim(*v));
    } else if (tok_.kind == Tok::Ident || tok_.kind == Tok::String) {
      out.shape.push_back(Dim::symbol(tok_.text));
    } else {
      return expected("a dimension (an integer or a symbol)");
    }
    advance();
    if (consumePunct(']'))
      return Error::success();
    NNC_TRY(expectPunct(','));
  }
}

Error Parser::parseValueRef(Value *&out, bool allowNone) {
  if (allowNone && isKeyword("none")) {
    out = nullptr;
    advance();
    return Error::success();
  }
  if (tok_.kind != Tok::ValueName)
    return expected(allowNone ? "a value (%name) or 'none'" : "a value (%name)");
  out = g_->findValue(tok_.text);
  if (!out)
    return errorAt(tok_, fmt::format("use of undefined value %{}", tok_.text));
  advance();
  return Error::success();
}

Error Parser::parseElement(const Token &t, DType dtype, void *dst) {
  if (t.kind != Tok::Number && !(t.kind == Tok::Ident && dtype == DType::Bool))
    return errorAt(t, fmt::format("expected a {} element, got {}", dtypeName(dtype), describe(t)));
  if (isFloat(dtype)) {
    Expected<uint64_t> bits = text::floatBitsOf(t.text, dtype);
    if (!bits)
      return errorAt(t, bits.error().message());
    if (dtype == DType::F64) {
      std::memcpy(dst, &*bits, 8);
    } else if (dtype == DType::F32) {
      uint32_t b = static_cast<uint32_t>(*bits);
      std::memcpy(dst, &b, 4);
    } else {
      uint16_t b = static_cast<uint16_t>(*bits);
      std::memcpy(dst, &b, 2);
    }
    return Error::success();
  }
  if (dtype == DType::Bool) {
    uint8_t b;
    if (t.text == "true" || t.text == "1")
      b = 1;
    else if (t.text == "false" || t.text == "0")
      b = 0;
    else
      return errorAt(t, fmt::format("expected true or false, got {}", describe(t)));
    std::memcpy(dst, &b, 1);
    return Error::success();
  }
  bool neg;
  uint64_t mag;
  if (text::looksFloat(t.text) || !text::parseIntText(t.text, neg, mag))
    return errorAt(t,
                   fmt::format("expected an integer {} element, got {}", dtypeName(dtype), t.text));
  int bits = static_cast<int>(dtypeSize(dtype)) * 8;
  bool isSigned = isSignedInteger(dtype);
  // Storage-only types are written as their raw byte, 0..255.
  uint64_t maxPos = isSigned ? (uint64_t(1) << (bits - 1)) - 1
                             : (bits == 64 ? UINT64_MAX : (uint64_t(1) << bits) - 1);
  uint64_t maxNeg = isSigned ? uint64_t(1) << (bits - 1) : 0;
  if ((neg && (mag > maxNeg || (!isSigned && mag != 0))) || (!neg && mag > maxPos))
    return errorAt(t, fmt::format("{} is out of range for {}", t.text, dtypeName(dtype)));
  uint64_t v = neg ? 0 - mag : mag;
  std::memcpy(dst, &v, dtypeSize(dtype)); // little-endian: the low bytes
  return Error::success();
}

Error Parser::parseTensor(Tensor &out) {
  NNC_TRY(expectKeyword("dense"));
  NNC_TRY(expectPunct('<'));
  if (isKeyword("null")) {
    advance();
    out = Tensor();
    return expectPunct('>');
  }
  Token typeTok = tok_;
  TensorType type;
  NNC_TRY(parseType(type));
  std::optional<Extents> extents = staticExtents(type.shape);
  if (!extents)
    return errorAt(typeTok, "a tensor's shape must be static, got " + type.str());
  NNC_TRY(expectPunct('>'));
  Expected<Tensor> t = Tensor::create(type.dtype, *extents);
  if (!t)
    return errorAt(typeTok, t.error().message());
  out = *t;
  char *data = static_cast<char *>(out.rawData());
  size_t elemSize = dtypeSize(type.dtype);
  if (isKeyword("hex")) {
    advance();
    if (tok_.kind != Tok::String)
      return expected("a hex string");
    const std::string &hex = tok_.text;
    if (hex.size() != 2 * out.byteSize())
      return errorAt(tok_, fmt::format("hex data has {} digits; {} needs {}", hex.size(),
                                       type.str(), 2 * out.byteSize()));
    for (size_t i = 0; i < out.byteSize(); ++i) {
      int v = 0;
      for (int k = 0; k < 2; ++k) {
        char c = hex[2 * i + k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
          return errorAt(tok_, fmt::format("bad hex digit {} in tensor data", charStr(c)));
        v = v * 16 + d;
      }
      data[i] = static_cast<char>(v);
    }
    advance();
    return Error::success();
  }
  Token open = tok_;
  NNC_TRY(expectPunct('['));
  int64_t n = 0;
  if (!isPunct(']')) {
    for (;;) {
      if (n >= out.numElements())
        return errorAt(tok_, fmt::format("too many elements for {}", type.str()));
      NNC_TRY(parseElement(tok_, type.dtype, data + n * elemSize));
      ++n;
      advance();
      if (isPunct(']'))
        break;
      NNC_TRY(expectPunct(','));
    }
  }
  if (n != out.numElements())
    return errorAt(open,
                   fmt::format("{} has {} elements, got {}", type.str(), out.numElements(), n));
  advance();
  return Error::success();
}

Error Parser::parseAttr(const OpInfo &info, AttrMap &attrs) {
  Token keyTok = tok_;
  if (tok_.kind != Tok::Ident && tok_.kind != Tok::String)
    return expected("an attribute name");
  std::string key = tok_.text;
  const AttrSpec *spec = info.findAttr(key);
  if (!spec)
    return errorAt(keyTok, fmt::format("unknown attribute '{}' for op '{}'", key, info.name));
  if (attrs.count(key))
    return errorAt(keyTok, fmt::format("duplicate attribute '{}'", key));
  advance();
  NNC_TRY(expectPunct('='));
  Token valTok = tok_;
  auto wrongKind = [&]() {
    return errorAt(valTok, fmt::format("attribute '{}' of '{}' must be {}, got {}", key, info.name,
                                       attrKindName(spec->kind), describe(valTok)));
  };
  switch (spec->kind) {
  case AttrKind::Int: {
    if (tok_.kind != Tok::Number || text::looksFloat(tok_.text))
      return wrongKind();
    Expected<int64_t> v = intOf(tok_);
    if (!v)
      return v.takeError();
    attrs[key] = *v;
    advance();
    break;
  }
  case AttrKind::Float: {
    if (tok_.kind != Tok::Number)
      return wrongKind();
    Expected<double> v = doubleOf(tok_);
    if (!v)
      return v.takeError();
    attrs[key] = *v;
    advance();
    break;
  }
  case AttrKind::String:
    if (tok_.kind != Tok::String)
      return wrongKind();
    attrs[key] = tok_.text;
    advance();
    break;
  case AttrKind::DType: {
    if (tok_.kind != Tok::Ident)
      return wrongKind();
    std::optional<DType> dt = parseDType(tok_.text);
    if (!dt)
      return errorAt(tok_, fmt::format("unknown dtype '{}'", tok_.text));
    attrs[key] = *dt;
    advance();
    break;
  }
  case AttrKind::Ints:
  case AttrKind::Floats: {
    if (!isPunct('['))
      return wrongKind();
    advance();
    std::vector<int64_t> ints;
    std::vector<double> floats;
    if (!isPunct(']')) {
      for (;;) {
        if (spec->kind == AttrKind::Ints) {
          if (tok_.kind == Tok::Number && text::looksFloat(tok_.text))
            return errorAt(tok_, fmt::format("attribute '{}' of '{}' must be ints, got {}", key,
                                             info.name, tok_.text));
          Expected<int64_t> v = intOf(tok_);
          if (!v)
            return v.takeError();
          ints.push_back(*v);
        } else {
          Expected<double> v = doubleOf(tok_);
          if (!v)
            return v.takeError();
          floats.push_back(*v);
        }
        advance();
        if (isPunct(']'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
    advance();
    if (spec->kind == AttrKind::Ints)
      attrs[key] = std::move(ints);
    else
      attrs[key] = std::move(floats);
    break;
  }
  case AttrKind::Tensor: {
    // The printer's elided form (PrintOptions::elideElementsOver) has no values to read.
    if (isKeyword("dense_resource"))
      return errorAt(valTok, fmt::format("attribute '{}' of '{}' is an elided constant "
                                         "(dense_resource<__elided__>), whose values were not "
                                         "printed; print the graph with `nnc inspect "
                                         "--full-constants` to parse it back",
                                         key, info.name));
    if (!isKeyword("dense"))
      return wrongKind();
    Tensor t;
    NNC_TRY(parseTensor(t));
    attrs[key] = std::move(t);
    break;
  }
  }
  return Error::success();
}

Error Parser::parseNode() {
  // Results.
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (;;) {
    if (tok_.kind != Tok::ValueName)
      return expected(names.empty() ? "a node (%result = op ...) or 'return'" : "a result name");
    if (g_->findValue(tok_.text) || seen.count(tok_.text))
      return errorAt(tok_, fmt::format("redefinition of value %{}", tok_.text));
    names.push_back(tok_.text);
    seen.insert(tok_.text);
    advance();
    if (!consumePunct(','))
      break;
  }
  NNC_TRY(expectPunct('='));
  Token opTok = tok_;
  if (tok_.kind != Tok::Ident)
    return expected("an op name");
  std::optional<OpKind> kind = lookupOp(tok_.text);
  if (!kind)
    return errorAt(tok_, fmt::format("unknown op '{}'", tok_.text));
  const OpInfo &info = opInfo(*kind);
  advance();

  // Operands.
  std::vector<Value *> operands;
  if (consumePunct('(')) {
    if (!consumePunct(')')) {
      for (;;) {
        Value *v;
        NNC_TRY(parseValueRef(v, /*allowNone=*/true));
        operands.push_back(v);
        if (consumePunct(')'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }
  int nops = static_cast<int>(operands.size());
  if (nops < info.minOperands || (info.maxOperands >= 0 && nops > info.maxOperands)) {
    std::string want = info.maxOperands < 0 ? fmt::format("at least {}", info.minOperands)
                       : info.minOperands == info.maxOperands
                           ? std::to_string(info.minOperands)
                           : fmt::format("{} to {}", info.minOperands, info.maxOperands);
    return errorAt(opTok, fmt::format("'{}' takes {} operands, got {}", info.name, want, nops));
  }

  // Attributes.
  AttrMap attrs;
  if (consumePunct('{')) {
    if (!consumePunct('}')) {
      for (;;) {
        NNC_TRY(parseAttr(info, attrs));
        if (consumePunct('}'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }

  // A loop node's body: `body graph @name(...) { ... }`, parsed into its own graph.
  std::shared_ptr<Graph> body;
  if (isKeyword("body")) {
    advance();
    std::unique_ptr<Graph> outer = std::move(g_);
    Expected<std::unique_ptr<Graph>> b = parseOneGraph();
    g_ = std::move(outer);
    if (!b)
      return b.takeError();
    body = std::move(*b);
  }

  // Result types and the optional node name.
  Token colon = tok_;
  NNC_TRY(expectPunct(':'));
  std::vector<TensorType> types;
  for (;;) {
    TensorType t;
    NNC_TRY(parseType(t));
    types.push_back(std::move(t));
    if (!consumePunct(','))
      break;
  }
  if (types.size() != names.size())
    return errorAt(colon,
                   fmt::format("{} results but {} result types", names.size(), types.size()));
  int nres = static_cast<int>(names.size());
  if (nres < info.minResults || (info.maxResults >= 0 && nres > info.maxResults))
    return errorAt(
        opTok,
        fmt::format("'{}' has {} to {} results, got {}", info.name, info.minResults,
                    info.maxResults < 0 ? std::string("any") : std::to_string(info.maxResults),
                    nres));
  std::string nodeName;
  if (tok_.kind == Tok::AtName) {
    nodeName = tok_.text;
    advance();
  }
  Node *n = g_->createNode(*kind, std::move(operands), std::move(types), std::move(attrs),
                           std::move(nodeName), names);
  n->setBody(std::move(body));
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) // createNode would give it a fresh name
      g_->renameValue(n->result(i), "");
  if (Error e = verifyNodeSignature(*n))
    return errorAt(opTok, e.message());
  return Error::success();
}

Expected<std::unique_ptr<Graph>> Parser::parse() {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseOneGraph());
  if (tok_.kind != Tok::Eof)
    return expected("end of file after the graph");
  return g;
}

Expected<std::unique_ptr<Graph>> Parser::parseOneGraph() {
  g_ = std::make_unique<Graph>();
  NNC_TRY(expectKeyword("graph"));
  if (tok_.kind != Tok::AtName)
    return expected("a graph name (@name)");
  g_->setName(tok_.text);
  advance();

  // Inputs.
  NNC_TRY(expectPunct('('));
  if (!consumePunct(')')) {
    for (;;) {
      if (tok_.kind != Tok::ValueName)
        return expected("a graph input (%name: type)");
      Token nameTok = tok_;
      if (g_->findValue(tok_.text))
        return errorAt(tok_, fmt::format("redefinition of value %{}", tok_.text));
      advance();
      NNC_TRY(expectPunct(':'));
      TensorType t;
      NNC_TRY(parseType(t));
      Value *v = g_->addInput(nameTok.text, std::move(t));
      if (nameTok.text.empty()) // addInput would give it a fresh name
        g_->renameValue(v, "");
      if (consumePunct(')'))
        break;
      NNC_TRY(expectPunct(','));
    }
  }

  // Declared output types (optional; checked against the returned values).
  bool haveOutTypes = false;
  Token outTypesTok = tok_;
  std::vector<std::optional<TensorType>> outTypes;
  if (tok_.kind == Tok::Arrow) {
    advance();
    haveOutTypes = true;
    NNC_TRY(expectPunct('('));
    if (!consumePunct(')')) {
      for (;;) {
        if (isKeyword("none")) {
          outTypes.push_back(std::nullopt);
          advance();
        } else {
          TensorType t;
          NNC_TRY(parseType(t));
          outTypes.push_back(std::move(t));
        }
        if (consumePunct(')'))
          break;
        NNC_TRY(expectPunct(','));
      }
    }
  }

  // Body.
  NNC_TRY(expectPunct('{'));
  while (!isKeyword("return"))
    NNC_TRY(parseNode());
  Token retTok = tok_;
  advance();
  std::vector<Value *> outputs;
  if (!isPunct('}')) {
    for (;;) {
      Value *v;
      NNC_TRY(parseValueRef(v, /*allowNone=*/true));
      outputs.push_back(v);
      if (!consumePunct(','))
        break;
    }
  }
  NNC_TRY(expectPunct('}'));
  if (haveOutTypes) {
    if (outTypes.size() != outputs.size())
      return errorAt(retTok, fmt::format("the graph declares {} outputs but returns {} values",
                                         outTypes.size(), outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      bool same = outputs[i] ? outTypes[i] && *outTypes[i] == outputs[i]->type() : !outTypes[i];
      if (!same)
        return errorAt(retTok, fmt::format("output {} is declared {} but the returned value is {}",
                                           i, outTypes[i] ? outTypes[i]->str() : "none",
                                           outputs[i] ? outputs[i]->type().str() : "none"));
    }
  }
  g_->setOutputs(std::move(outputs));
  return std::move(g_);
}

} // namespace

Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text, const std::string &filename) {
  Parser p(text, filename);
  return p.parse();
}

Expected<std::unique_ptr<Graph>> parseGraphFile(const std::string &path) {
  NNC_ASSIGN_OR_RETURN(std::string text, text::readTextFile(path));
  return parseGraph(text, path);
}

} // namespace nnc
