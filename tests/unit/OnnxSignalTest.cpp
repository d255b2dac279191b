// DFT (17 and 20) and STFT (17) imported from ONNX and run on the interpreter, against a
// direct double-precision evaluation of the transforms over the forms the ONNX node tests do
// not reach: every signal axis, complex input, dft_length padding and cutting, one-sided and
// inverse spectra (irfft with even and odd lengths), windows shorter and longer than the
// frame; and the errors of bad axes and lengths.
#include <cmath>
#include <complex>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nnc/frontend/OnnxImporter.h"
#include "nnc/runtime/Interpreter.h"
#include "nnc/support/Float16.h"
#include "tests/unit/OnnxTestModel.h"

namespace nnc {
namespace {

using namespace testonnx;
using cd = std::complex<double>;

Tensor randomF64(const Extents &e, std::mt19937 &rng) {
  std::uniform_real_distribution<double> u(-2, 2);
  Tensor t = Tensor::zeros(DType::F64, e);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<double>()[i] = u(rng);
  return t;
}

Tensor i64Scalar(int64_t v) {
  return Tensor::scalar<int64_t>(DType::I64, v);
}

/// x's element at `idx` (without the parts dim) as a complex number.
cd sampleAt(const Tensor &x, std::vector<int64_t> idx) {
  const Extents &e = x.extents();
  int64_t parts = e.back(), flat = 0;
  idx.push_back(0);
  for (size_t d = 0; d < e.size(); ++d)
    flat = flat * e[d] + idx[d];
  const double *p = x.data<double>() + flat;
  return parts == 2 ? cd(p[0], p[1]) : cd(p[0], 0);
}

/// ONNX DFT evaluated directly: out extents and values (row-major, the parts last).
std::vector<double> referenceDft(const Tensor &x, int64_t axis, int64_t length, bool inverse,
                                 bool onesided, Extents &out) {
  const Extents &e = x.extents();
  int64_t n = e[static_cast<size_t>(axis)];
  bool irfft = inverse && onesided;
  int64_t len = length > 0 ? length : (irfft ? 2 * (n - 1) : n);
  out = e;
  out[static_cast<size_t>(axis)] = irfft ? len : (onesided ? len / 2 + 1 : len);
  out.back() = irfft ? 1 : 2;
  Extents pos(out.begin(), out.end() - 1);
  int64_t count = 1;
  for (int64_t d : pos)
    count *= d;
  std::vector<double> y;
  std::vector<int64_t> idx(pos.size(), 0);
  double sign = inverse ? 1 : -1;
  for (int64_t c = 0; c < count; ++c) {
    int64_t k = idx[static_cast<size_t>(axis)];
    auto at = [&](int64_t m) {
      std::vector<int64_t> j = idx;
      j[static_cast<size_t>(axis)] = m;
      return sampleAt(x, j);
    };
    if (irfft) {
      // The Hermitian spectrum of bins 0 .. len/2 (missing ones 0), its inverse's real part.
      double s = 0;
      for (int64_t b = 0; b < len; ++b) {
        int64_t src = b <= len / 2 ? b : len - b;
        cd v = src < n ? at(src) : cd(0, 0);
        if (src == 0 || 2 * src == len)
          v = cd(v.real(), 0);
        if (b != src)
          v = std::conj(v);
        s += (v * std::polar(1.0, 2 * M_PI * double(b) * double(k) / double(len))).real();
      }
      y.push_back(s / double(len));
    } else {
      cd s(0, 0);
      for (int64_t m = 0; m < std::min(n, len); ++m)
        s += at(m) * std::polar(1.0, sign * 2 * M_PI * double(k) * double(m) / double(len));
      if (inverse)
        s /= double(len);
      y.push_back(s.real());
      y.push_back(s.imag());
    }
    for (size_t d = pos.size(); d-- > 0;) {
      if (++idx[d] < pos[d])
        break;
      idx[d] = 0;
    }
  }
  return y;
}

void expectValues(const Tensor &got, const Extents &shape, const std::vector<double> &want,
                  const std::string &what, double tol = 1e-9) {
  ASSERT_EQ(extentsStr(got.extents()), extentsStr(shape)) << what;
  ASSERT_EQ(got.dtype(), DType::F64) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<double>()[i], want[i], tol * (1 + std::abs(want[i])))
        << what << " element " << i;
}

struct DftCase {
  Extents shape;
  int64_t axis;   // as written in the model (may be negative)
  int64_t length; // dft_length, or -1 for none
  bool inverse, onesided;
};

/// One DFT through the importer at `opset` (17: axis attribute; 20: axis input) against
/// referenceDft.
void checkDft(int64_t opset, const DftCase &c, std::mt19937 &rng) {
  Tensor x = randomF64(c.shape, rng);
  int64_t r = static_cast<int64_t>(c.shape.size());
  std::string what = fmt::format("DFT-{} {} axis {} length {} inverse {} onesided {}", opset,
                                 extentsStr(c.shape), c.axis, c.length, c.inverse, c.onesided);
  std::vector<Pb> attrs{attrInt("inverse", c.inverse), attrInt("onesided", c.onesided)};
  std::vector<std::string> ins{"x", c.length > 0 ? "len" : ""};
  std::vector<std::pair<std::string, Tensor>> inits;
  if (c.length > 0)
    inits.push_back({"len", i64Scalar(c.length)});
  if (opset >= 20) {
    ins.push_back("axis");
    inits.push_back({"axis", i64Scalar(c.axis)});
  } else {
    attrs.push_back(attrInt("axis", c.axis));
  }
  Expected<std::unique_ptr<Graph>> g =
      importModel(opset, {node("DFT", ins, {"y"}, attrs)}, {{"x", x}}, inits, {"y"});
  ASSERT_TRUE(g) << what << ": " << g.error().message();
  Expected<std::vector<Tensor>> y = interpret(**g, {x});
  ASSERT_TRUE(y) << what << ": " << y.error().message();
  Extents shape;
  std::vector<double> want =
      referenceDft(x, c.axis < 0 ? c.axis + r : c.axis, c.length, c.inverse, c.onesided, shape);
  expectValues((*y)[0], shape, want, what);
}

TEST(OnnxSignal, DftEveryAxisLengthAndDirection) {
  std::mt19937 rng(17);
  const DftCase cases[] = {{{2, 5, 3, 1}, 1, -1, false, false}, {{2, 5, 3, 1}, 2, -1, false, false},
                           {{2, 5, 3, 2}, 1, -1, false, false}, {{2, 5, 3, 2}, 2, -1, true, false},
                           {{2, 5, 3, 1}, -3, -1, true, false}, {{2, 5, 3, 1}, 1, 8, false, false},
                           {{2, 5, 3, 2}, 1, 3, false, false},  {{2, 5, 3, 1}, 0, -1, false, false},
                           {{2, 7, 3, 1}, 1, -1, false, true},  {{2, 6, 3, 1}, -2, 9, false, true},
                           {{2, 4, 3, 2}, 1, -1, true, true},   {{2, 4, 3, 2}, 1, 7, true, true},
                           {{2, 4, 3, 2}, 1, 4, true, true},    {{2, 3, 1}, 1, 5, true, true},
                           {{6, 1}, 0, -1, false, false},       {{6, 2}, -2, 4, true, false}};
  for (const DftCase &c : cases) {
    checkDft(17, c, rng);
    checkDft(20, c, rng);
  }
}

TEST(OnnxSignal, Dft20DefaultsToTheLastSignalAxis) {
  std::mt19937 rng(20);
  Tensor x = randomF64({2, 3, 4, 2}, rng);
  Expected<std::unique_ptr<Graph>> g =
      importModel(20, {node("DFT", {"x"}, {"y"})}, {{"x", x}}, {}, {"y"});
  ASSERT_TRUE(g) << g.error().message();
  Expected<std::vector<Tensor>> y = interpret(**g, {x});
  ASSERT_TRUE(y) << y.error().message();
  Extents shape;
  std::vector<double> want = referenceDft(x, 2, -1, false, false, shape);
  expectValues((*y)[0], shape, want, "DFT-20 default axis");
}

TEST(OnnxSignal, DftKeepsHalfPrecisionTypes) {
  for (DType t : {DType::F16, DType::BF16, DType::F32}) {
    std::vector<float> v{1, 2, 3, 4, 0, -1, 2, 0.5f};
    Tensor x = Tensor::zeros(t, {1, 8, 1});
    for (int i = 0; i < 8; ++i) {
      if (t == DType::F32)
        x.data<float>()[i] = v[i];
      else
        x.data<uint16_t>()[i] = t == DType::F16 ? floatToHalf(v[i]) : floatToBf16(v[i]);
    }
    Expected<std::unique_ptr<Graph>> g = importModel(
        17, {node("DFT", {"x"}, {"y"}, {attrInt("onesided", 1)})}, {{"x", x}}, {}, {"y"});
    ASSERT_TRUE(g) << g.error().message();
    Expected<std::vector<Tensor>> y = interpret(**g, {x});
    ASSERT_TRUE(y) << y.error().message();
    const Tensor &out = (*y)[0];
    ASSERT_EQ(out.dtype(), t);
    ASSERT_EQ(extentsStr(out.extents()), "[1,5,2]");
    EXPECT_NEAR(out.elementAsDouble(0), 11.5, 0.1); // bin 0: the sum
    EXPECT_EQ(out.elementAsDouble(1), 0.0);         // its imaginary part exactly 0
    EXPECT_EQ(out.elementAsDouble(9), 0.0);         // the Nyquist bin's too
  }
}

TEST(OnnxSignal, DftErrorsNameTheProblem) {
  Tensor x = Tensor::zeros(DType::F32, {2, 4, 1});
  auto errorOf = [&](int64_t opset, const Pb &n,
                     const std::vector<std::pair<std::string, Tensor>> &inits) {
    Expected<std::unique_ptr<Graph>> g = importModel(opset, {n}, {{"x", x}}, inits, {"y"});
    return g ? std::string() : g.error().message();
  };
  EXPECT_NE(errorOf(17, node("DFT", {"x"}, {"y"}, {attrInt("axis", 2)}), {}).find("axis 2"),
            std::string::npos);
  EXPECT_NE(errorOf(17, node("DFT", {"x"}, {"y"}, {attrInt("axis", -1)}), {}).find("axis -1"),
            std::string::npos);
  EXPECT_NE(errorOf(20, node("DFT", {"x"}, {"y"}, {attrInt("axis", 1)}), {}).find("input 2"),
            std::string::npos);
  EXPECT_NE(errorOf(20, node("DFT", {"x", "len"}, {"y"}), {{"len", i64Scalar(0)}})
                .find("must be positive"),
            std::string::npos);
  // irfft of one bin has no default length.
  Tensor one = Tensor::zeros(DType::F32, {1, 1, 2});
  Expected<std::unique_ptr<Graph>> g =
      importModel(17, {node("DFT", {"x"}, {"y"}, {attrInt("inverse", 1), attrInt("onesided", 1)})},
                  {{"x", one}}, {}, {"y"});
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("must be positive"), std::string::npos) << g.error().message();
}

/// ONNX STFT evaluated directly (as the ONNX reference does): [batch, frames, bins, 2].
std::vector<double> referenceStft(const Tensor &x, int64_t step, const std::vector<double> &win,
                                  int64_t length, bool onesided, Extents &out) {
  const Extents &e = x.extents();
  int64_t b = e[0], s = e[1], w = static_cast<int64_t>(win.size());
  int64_t frames = 1 + (s - length) / step, bins = onesided ? length / 2 + 1 : length;
  out = {b, frames, bins, 2};
  std::vector<double> y;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < bins; ++k) {
        cd acc(0, 0);
        for (int64_t j = 0; j < std::min(w, length); ++j) {
          int64_t at = f * step + j;
          cd v = at < s ? sampleAt(x, {bi, at}) : cd(0, 0);
          acc += v * win[static_cast<size_t>(j)] *
                 std::polar(1.0, -2 * M_PI * double(k) * double(j) / double(length));
        }
        y.push_back(acc.real());
        y.push_back(acc.imag());
      }
  return y;
}

TEST(OnnxSignal, StftWindowsAndFrameLengths) {
  std::mt19937 rng(23);
  struct Case {
    int64_t parts, step, windowLen, frameLen; // windowLen -1: no window; frameLen -1: none
    bool onesided;
  };
  const Case cases[] = {{1, 4, -1, 8, true}, {1, 3, 8, -1, true}, {1, 4, 6, 8, true},
                        {1, 5, 10, 8, true}, {1, 4, 8, 8, false}, {2, 4, 8, -1, false},
                        {1, 7, -1, 20, true}};
  for (const Case &c : cases) {
    Tensor x = randomF64({2, 20, c.parts}, rng);
    std::vector<Pb> attrs{attrInt("onesided", c.onesided)};
    std::vector<std::pair<std::string, Tensor>> inputs{{"x", x}};
    std::vector<std::pair<std::string, Tensor>> inits{{"step", i64Scalar(c.step)}};
    std::vector<std::string> ins{"x", "step", "", ""};
    std::vector<double> win;
    if (c.windowLen > 0) {
      Tensor wt = randomF64({c.windowLen}, rng);
      win.assign(wt.data<double>(), wt.data<double>() + c.windowLen);
      inputs.push_back({"w", wt});
      ins[2] = "w";
    }
    if (c.frameLen > 0) {
      inits.push_back({"len", i64Scalar(c.frameLen)});
      ins[3] = "len";
    }
    int64_t length = c.frameLen > 0 ? c.frameLen : c.windowLen;
    if (win.empty())
      win.assign(static_cast<size_t>(length), 1.0);
    std::string what = fmt::format("STFT parts {} step {} window {} frame_length {} onesided {}",
                                   c.parts, c.step, c.windowLen, c.frameLen, c.onesided);
    Expected<std::unique_ptr<Graph>> g =
        importModel(17, {node("STFT", ins, {"y"}, attrs)}, inputs, inits, {"y"});
    ASSERT_TRUE(g) << what << ": " << g.error().message();
    std::vector<Tensor> values;
    for (const auto &in : inputs)
      values.push_back(in.second);
    Expected<std::vector<Tensor>> y = interpret(**g, values);
    ASSERT_TRUE(y) << what << ": " << y.error().message();
    Extents shape;
    std::vector<double> want = referenceStft(x, c.step, win, length, c.onesided, shape);
    expectValues((*y)[0], shape, want, what);
  }
}

TEST(OnnxSignal, StftNeedsAFrameThatFits) {
  Tensor x = Tensor::zeros(DType::F32, {1, 10, 1});
  Expected<std::unique_ptr<Graph>> g =
      importModel(17, {node("STFT", {"x", "step", "", "len"}, {"y"})}, {{"x", x}},
                  {{"step", i64Scalar(2)}, {"len", i64Scalar(16)}}, {"y"});
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("longer than the signal"), std::string::npos)
      << g.error().message();
}

} // namespace
} // namespace nnc
