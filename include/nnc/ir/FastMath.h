// The f32 transcendental functions (exp, sigmoid, tanh, erf) as branch-free arithmetic, written
// once over a builder so that every backend computes the same numbers: the interpreter and the
// kernel evaluator run it on floats (ScalarBuilder below, behind Ops.def's formulas), the LLVM
// emitter builds IR from it (straight-line code the loop vectorizer widens to the target's
// width: no libm or libmvec call), and the C printer writes it as OpenCL helper functions.
//
// Accuracy over the whole f32 range (tests/unit/FastMathTest.cpp sweeps it against double
// references: every 97th bit pattern plus the special values):
//   exp      <= 1 ulp; overflow gives +inf, underflow gives denormals then 0; NaN stays NaN
//   sigmoid  <= 2 ulp, stable for both signs (1/(1+e^-|x|), mirrored for x < 0)
//   tanh     <= 2 ulp; an odd polynomial for |x| < 0.625, (1-e^-2|x|)/(1+e^-2|x|) beyond
//   erf      <= 2 ulp; an odd polynomial for |x| < 1, 1 - e^q(|x|) beyond (1 from |x| >= 4)
//
// A builder B has value types F (f32), I (u32) and M (a mask) and these members:
//   F f(double)                     an f32 constant          I u(uint32_t)   a u32 constant
//   F add, sub, mul, div (F, F)     IEEE f32 arithmetic      F neg(F), abs(F)
//   F fma(F a, F b, F c)            a*b+c, one rounding
//   M lt, gt (F, F)                 ordered: false when either is NaN
//   F select(M, F, F)
//   I bits(F), F fromBits(I)        the f32 bit pattern and back
//   I iadd, isub (I, I)             wrapping u32 arithmetic
//   I shl(I, int)                   shift left
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace nnc::fastmath {

/// c[0]*x^(n-1) + ... + c[n-1] by Horner's rule with FMAs.
template <class B> typename B::F horner(B &b, typename B::F x, std::initializer_list<double> c) {
  auto it = c.begin();
  typename B::F acc = b.f(*it++);
  for (; it != c.end(); ++it)
    acc = b.fma(acc, x, b.f(*it));
  return acc;
}

/// e^x. Steps:
///  1. Clamp x to [-104, 89]: beyond, e^x is 0 or +inf in f32 and the clamped value gives it
///     too; NaN passes (the compares are ordered).
///  2. n = round(x / ln2) by adding 1.5*2^23 (the integer lands in the low mantissa bits, so
///     no float->int conversion, which LLVM leaves undefined for NaN), r = x - n*ln2 with ln2
///     in two parts (Cody-Waite): exact high product, |r| <= ln2/2.
///  3. e^r = 1 + r + r^2 * p(r), p a degree-5 minimax polynomial (SLEEF's expf).
///  4. Scale by 2^n as 2^h * 2^(n-h), h = round(x / (2 ln2)), each factor built in the
///     exponent bits: both stay normal for n in [-150, 128], so the one rounding happens in the
///     last multiply and denormal results are correctly formed.
template <class B> typename B::F exp(B &b, typename B::F x) {
  using F = typename B::F;
  using I = typename B::I;
  x = b.select(b.gt(x, b.f(89.0)), b.f(89.0), x);
  x = b.select(b.lt(x, b.f(-104.0)), b.f(-104.0), x);
  const double shifter = 12582912.0; // 1.5 * 2^23
  F k = b.fma(x, b.f(1.44269504088896341), b.f(shifter));
  F n = b.sub(k, b.f(shifter));
  F r = b.fma(n, b.f(-0.693145751953125), x);
  r = b.fma(n, b.f(-1.428606765330187045e-06), r);
  F p = horner(b, r,
               {0.000198527617612853646278381, 0.00139304355252534151077271,
                0.00833336077630519866943359, 0.0416664853692054748535156,
                0.166666671633720397949219, 0.5});
  F er = b.add(b.f(1.0), b.fma(b.mul(r, r), p, r));
  // 2^h and 2^(n-h) with h = round(n/2) from a second shifter: the bits of k and kh are
  // those of the shifter plus n and h, so (bits + 127) << 23 is the power of two (the
  // shifter's bits are a multiple of 2^22 and shift out) and bits(k) - bits(kh) is n - h.
  I kh = b.bits(b.fma(x, b.f(0.721347520444481703), b.f(shifter)));
  F s1 = b.fromBits(b.shl(b.iadd(kh, b.u(127)), 23));
  F s2 = b.fromBits(b.shl(b.iadd(b.isub(b.bits(k), kh), b.u(127)), 23));
  return b.mul(b.mul(er, s1), s2);
}

/// 1/(1+e^-x): with t = e^-|x| in (0, 1], q = 1/(1+t) is the result for x >= 0 and t*q for
/// x < 0, so nothing overflows and tiny results keep their precision.
template <class B> typename B::F sigmoid(B &b, typename B::F x) {
  using F = typename B::F;
  F t = exp(b, b.neg(b.abs(x)));
  F q = b.div(b.f(1.0), b.add(b.f(1.0), t));
  return b.select(b.lt(x, b.f(0.0)), b.mul(t, q), q);
}

/// tanh x: x + x^3 p(x^2) for 2^-13 <= |x| < 0.625 (Cephes' tanhf coefficients), where 1 - e^-2|x|
/// would cancel; (1-t)/(1+t) with t = e^-2|x|, signed, beyond (1 for large |x|, NaN stays).
template <class B> typename B::F tanh(B &b, typename B::F x) {
  using F = typename B::F;
  F a = b.abs(x);
  F z = b.mul(x, x);
  F p = horner(b, z,
               {-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                -3.33332819422e-1});
  // x itself below 2^-13 (the x^3 term is under half an ulp), keeping tanh(-0) = -0.
  F small = b.select(b.lt(a, b.f(0x1p-13)), x, b.fma(b.mul(p, z), x, x));
  F t = exp(b, b.mul(a, b.f(-2.0)));
  F big = b.div(b.sub(b.f(1.0), t), b.add(b.f(1.0), t));
  big = b.select(b.lt(x, b.f(0.0)), b.neg(big), big);
  return b.select(b.lt(a, b.f(0.625)), small, big);
}

/// erf x, odd: for |x| < 1, x + x p(x^2) (p of degree 6, fitted for relative error 1e-9); for
/// |x| >= 1, 1 - e^q(|x|) with q ~ log(erfc) of degree 6 on [1, 4], fitted for the error of
/// the result (1e-9; q may be as loose as erf is close to 1), |x| clamped to 4 (erf is 1 in f32
/// from 3.92). Fits: near-minimax by iteratively reweighted least squares on Chebyshev nodes.
template <class B> typename B::F erf(B &b, typename B::F x) {
  using F = typename B::F;
  F a = b.abs(x);
  F s = b.mul(x, x);
  F p = horner(b, s,
               {7.88910890503619e-05, -0.0008020838099545707, 0.005189534982638105,
                -0.026854444407644576, 0.11283600171959471, -0.37612627135599763,
                0.12837916591370072});
  F small = b.fma(x, p, x);
  F c = b.select(b.gt(a, b.f(4.0)), b.f(4.0), a);
  F q = horner(b, c,
               {0.00018557752492720514, -0.002939640857898329, 0.021805448967872954,
                -0.10303763447374065, -0.6382253792054668, -1.127040210973826,
                -0.000353677460867383});
  F big = b.sub(b.f(1.0), exp(b, q));
  big = b.select(b.lt(x, b.f(0.0)), b.neg(big), big);
  return b.select(b.lt(a, b.f(1.0)), small, big);
}

/// The builder on plain floats: the scalar semantics of the interpreter and evaluator.
struct ScalarBuilder {
  using F = float;
  using I = uint32_t;
  using M = bool;
  F f(double v) const { return static_cast<float>(v); }
  I u(uint32_t v) const { return v; }
  F add(F a, F b) const { return a + b; }
  F sub(F a, F b) const { return a - b; }
  F mul(F a, F b) const { return a * b; }
  F div(F a, F b) const { return a / b; }
  F neg(F a) const { return -a; }
  F abs(F a) const { return std::fabs(a); }
  F fma(F a, F b, F c) const { return std::fma(a, b, c); }
  M lt(F a, F b) const { return a < b; }
  M gt(F a, F b) const { return a > b; }
  F select(M m, F a, F b) const { return m ? a : b; }
  I bits(F a) const {
    I r;
    std::memcpy(&r, &a, 4);
    return r;
  }
  F fromBits(I a) const {
    F r;
    std::memcpy(&r, &a, 4);
    return r;
  }
  I iadd(I a, I b) const { return a + b; }
  I isub(I a, I b) const { return a - b; }
  I shl(I a, int s) const { return a << s; }
};

inline float expF32(float x) {
  ScalarBuilder b;
  return exp(b, x);
}
inline float sigmoidF32(float x) {
  ScalarBuilder b;
  return sigmoid(b, x);
}
inline float tanhF32(float x) {
  ScalarBuilder b;
  return tanh(b, x);
}
inline float erfF32(float x) {
  ScalarBuilder b;
  return erf(b, x);
}

} // namespace nnc::fastmath
