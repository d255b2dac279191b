// The text-IR printer. Everything it prints parses back (ir/Parser.cpp) to the same graph.
//
// Grammar (`//` starts a comment that runs to the end of the line):
//   graph    ::= 'graph' '@' name '(' [input {',' input}] ')' ['->' '(' [otype {',' otype}] ')']
//                '{' {node} 'return' [ret {',' ret}] '}'
//   input    ::= '%' name ':' type
//   otype    ::= type | 'none'                     (the types of the returned values)
//   node     ::= '%' name {',' '%' name} '=' opname ['(' [operand {',' operand}] ')']
//                ['{' attr {',' attr} '}'] ':' type {',' type} ['@' name]
//   operand  ::= '%' name | 'none'                 (an absent optional operand)
//   ret      ::= '%' name | 'none'
//   type     ::= dtype '[' [dim {',' dim}] ']'     (f32[N,3], rank 0: f32[])
//   dim      ::= integer | ident | string          (constant or symbol)
//   attr     ::= attrname '=' value
//   value    ::= integer | float | string | dtype | '[' [number {',' number}] ']'
//              | 'dense' '<' type '>' ('[' elems ']' | 'hex' string) | 'dense' '<' 'null' '>'
//              | 'dense_resource' '<' '__elided__' '>' ':' type   (printed only, never parsed)
//   name     ::= [A-Za-z0-9_.]+ | string           (strings use \" \\ \n \t \xHH escapes)
// Floats always carry a '.', an exponent, or are inf / -inf / nan / -nan / nan:0xBITS (a
// NaN other than the canonical quiet one, by its exact bits), so they parse back to the
// same bits. Tensor elements are flat, row-major; f16 and bf16 print as their (exactly
// representable) values, storage-only types as raw bytes `0xHH`. Tensors with more than
// PrintOptions::maxInlineElements elements print as `hex"..."`: the raw bytes in memory
// (little-endian) order. With PrintOptions::elideElementsOver set, larger ones print as
// `dense_resource<__elided__> : type`, MLIR's form for an elided constant: readable, but not
// parsed back (ir/Parser.cpp says so at that place).
#include "nnc/ir/Printer.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "TextSyntax.h"
#include "nnc/support/Float16.h"

namespace nnc {

namespace {

/// A value, node or graph name: bare when every character is a name character.
std::string name(std::string_view s) {
  bool bare = !s.empty();
  for (char c : s)
    bare = bare && text::isNameChar(c);
  return bare ? std::string(s) : text::quote(s);
}

/// A symbolic dim: bare when it is an identifier that cannot be read as a number.
std::string symbol(std::string_view s) {
  bool bare = !s.empty() && text::isIdentStart(s[0]) && s != "inf" && s != "nan";
  for (char c : s)
    bare = bare && text::isNameChar(c) && c != '.';
  return bare ? std::string(s) : text::quote(s);
}

std::string typeStr(const TensorType &t) {
  std::string out(dtypeName(t.dtype));
  out += '[';
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i)
      out += ',';
    const Dim &d = t.shape[i];
    out += d.isStatic() ? std::to_string(d.value()) : symbol(d.symbolName());
  }
  out += ']';
  return out;
}

/// A NaN's text: nan, -nan or nan:0xBITS (hex digits for `width` bits).
std::string nanStr(uint64_t bits, uint64_t canonical, int width) {
  uint64_t signBit = uint64_t(1) << (width - 1);
  if (bits == canonical)
    return "nan";
  if (bits == (canonical | signBit))
    return "-nan";
  return fmt::format("nan:0x{:0{}x}", bits, width / 4);
}

std::string doubleStr(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  if (std::isnan(v))
    return nanStr(bits, text::kCanonicalNaN64, 64);
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eni") == std::string::npos)
    s += ".0";
  return s;
}

std::string floatStr(float v) {
  if (std::isnan(v))
    return nanStr(floatBits(v), text::kCanonicalNaN32, 32);
  return fmt::format("{}", v);
}

std::string halfStr(uint16_t h, bool bf16) {
  bool nan =
      bf16 ? ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) : ((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
  if (nan)
    return nanStr(h, bf16 ? text::kCanonicalNaNBF16 : text::kCanonicalNaNF16, 16);
  return fmt::format("{}", bf16 ? bf16ToFloat(h) : halfToFloat(h));
}

std::string elementStr(const Tensor &t, int64_t i) {
  const void *p = static_cast<const char *>(t.rawData()) + i * dtypeSize(t.dtype());
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t.dtype()) {
  case DType::F32:
    return floatStr(load(float()));
  case DType::F64:
    return doubleStr(load(double()));
  case DType::F16:
    return halfStr(load(uint16_t()), false);
  case DType::BF16:
    return halfStr(load(uint16_t()), true);
  case DType::I8:
    return std::to_string(load(int8_t()));
  case DType::U8:
    return std::to_string(load(uint8_t()));
  case DType::I16:
    return std::to_string(load(int16_t()));
  case DType::U16:
    return std::to_string(load(uint16_t()));
  case DType::I32:
    return std::to_string(load(int32_t()));
  case DType::U32:
    return std::to_string(load(uint32_t()));
  case DType::I64:
    return std::to_string(load(int64_t()));
  case DType::U64:
    return std::to_string(load(uint64_t()));
  case DType::Bool:
    return load(uint8_t()) ? "true" : "false";
  default:
    return fmt::format("0x{:02x}", load(uint8_t()));
  }
}

std::string tensorStr(const Tensor &t, const PrintOptions &opts) {
  if (t.isNull())
    return "dense<null>";
  if (opts.elideElementsOver >= 0 && t.numElements() > opts.elideElementsOver)
    return "dense_resource<__elided__> : " + typeStr(t.type());
  std::string out = "dense<" + typeStr(t.type()) + ">";
  if (t.numElements() > opts.maxInlineElements) {
    static const char digits[] = "0123456789abcdef";
    const auto *bytes = static_cast<const unsigned char *>(t.rawData());
    size_t n = t.byteSize();
    std::string hex(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
      hex[2 * i] = digits[bytes[i] >> 4];
      hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    return out + "hex\"" + hex + "\"";
  }
  out += '[';
  for (int64_t i = 0; i < t.numElements(); ++i) {
    if (i)
      out += ", ";
    out += elementStr(t, i);
  }
  return out + "]";
}

std::string attrStr(const Attribute &a, const PrintOptions &opts) {
  switch (attrKind(a)) {
  case AttrKind::Int:
    return std::to_string(std::get<int64_t>(a));
  case AttrKind::Float:
    return doubleStr(std::get<double>(a));
  case AttrKind::String:
    return text::quote(std::get<std::string>(a));
  case AttrKind::Ints: {
    std::string out = "[";
    for (int64_t v : std::get<std::vector<int64_t>>(a))
      out += (out.size() > 1 ? ", " : "") + std::to_string(v);
    return out + "]";
  }
  case AttrKind::Floats: {
    std::string out = "[";
    for (double v : std::get<std::vector<double>>(a))
      out += (out.size() > 1 ? ", " : "") + doubleStr(v);
    return out + "]";
  }
  case AttrKind::Tensor:
    return tensorStr(std::get<Tensor>(a), opts);
  case AttrKind::DType:
    return std::string(dtypeName(std::get<DType>(a)));
  }
  return "?";
}

std::string valueRef(const Value *v) {
  return v ? "%" + name(v->name()) : "none";
}

} // namespace

void printGraph(const Graph &g, std::ostream &os, const PrintOptions &opts) {
  os << "graph @" << name(g.name()) << "(";
  for (size_t i = 0; i < g.inputs().size(); ++i)
    os << (i ? ", " : "") << valueRef(g.inputs()[i]) << ": " << typeStr(g.inputs()[i]->type());
  os << ") -> (";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value *o = g.outputs()[i];
    os << (i ? ", " : "") << (o ? typeStr(o->type()) : "none");
  }
  os << ") {\n";
  for (const Node *n : g.nodes()) {
    os << "  ";
    for (size_t i = 0; i < n->numResults(); ++i)
      os << (i ? ", " : "") << valueRef(n->result(i));
    os << " = " << n->opName();
    if (n->numOperands()) {
      os << "(";
      for (size_t i = 0; i < n->numOperands(); ++i)
        os << (i ? ", " : "") << valueRef(n->operand(i));
      os << ")";
    }
    if (!n->attrs().empty()) {
      os << " {";
      bool first = true;
      for (const auto &[key, value] : n->attrs()) {
        os << (first ? "" : ", ") << symbol(key) << " = " << attrStr(value, opts);
        first = false;
      }
      os << "}";
    }
    if (n->body()) { // nested one level deeper
      std::string text = printGraph(*n->body(), opts);
      text.pop_back(); // the final newline
      os << " body ";
      for (char c : text) {
        os << c;
        if (c == '\n')
          os << "  ";
      }
    }
    os << " : ";
    for (size_t i = 0; i < n->numResults(); ++i)
      os << (i ? ", " : "") << typeStr(n->result(i)->type());
    if (!n->name().empty())
      os << " @" << name(n->name());
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << (i ? ", " : " ") << valueRef(g.outputs()[i]);
  os << "\n}\n";
}

std::string printGraph(const Graph &g, const PrintOptions &opts) {
  std::ostringstream os;
  printGraph(g, os, opts);
  return os.str();
}

} // namespace nnc
