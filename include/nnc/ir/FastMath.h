// The f32 transcendental functions (exp, sigmoid, tanh, erf, pow) as branch-free arithmetic,
// written once over a builder so that every backend computes the same numbers: the interpreter
// and the kernel evaluator's formulas run it on floats (ScalarBuilder below, behind Ops.def's
// formulas), and the expansion of composite ops (ir/KernelExpand.cpp) builds kernel IR from it,
// which the LLVM emitter and the OpenCL printer translate like any other primitives
// (straight-line code the loop vectorizer widens to the target's width: no libm call).
//
// Accuracy over the whole f32 range (tests/unit/FastMathTest.cpp sweeps it against double
// references: every 97th bit pattern plus the special values):
//   exp      <= 1 ulp (0.98 the most seen); overflow gives +inf, underflow gives denormals
//            then 0; NaN stays NaN
//   sigmoid  <= 3 ulp (2.62 the most seen), stable for both signs (1/(1+e^-|x|), mirrored for
//            x < 0)
//   tanh     <= 2 ulp (1.50 the most seen); an odd polynomial for |x| < 0.625,
//            (1-e^-2|x|)/(1+e^-2|x|) beyond
//   erf      <= 2 ulp (1.28 the most seen); an odd polynomial for |x| < 1, 1 - e^q(|x|)
//            beyond (1 from |x| >= 4)
//   pow      <= 2 ulp (1.14 the most seen over 40M random pairs); e^(y log|x|) with log|x| and
//            the product in double-float (two f32s), and every IEEE/C99 special case
//            (FastMathTest: every special value against every other, random pairs)
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
// and, for pow only:
//   M eq(F, F)                      ordered equality
//   M mand, mor (M, M), mnot(M)     mask logic
//   F floor(F)                      round toward -inf
//   I shr(I, int)                   logical shift right
//   I iand, ior (I, I)              bitwise and, or
#pragma once

#include <array>
#include <cassert>
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

/// The same polynomial by Estrin's scheme: pairs a + b x, then pairs of those in x^2, x^4, ...
/// Its chain of dependent operations is about log2 of the degree deep instead of the degree:
/// what bounds a vectorized loop of the function once the out-of-order window is full.
template <class B> typename B::F estrin(B &b, typename B::F x, std::initializer_list<double> c) {
  using F = typename B::F;
  // In place, without allocating: the scalar builder runs this per element (the interpreter's
  // and constant folding's erf).
  constexpr size_t kMaxCoefficients = 8;
  assert(c.size() <= kMaxCoefficients);
  std::array<F, kMaxCoefficients> t{};
  size_t n = 0;
  for (auto it = c.end(); it != c.begin() && n < kMaxCoefficients;) // ascending: t[i] * x^i
    t[n++] = b.f(*--it);
  F xp = x;
  while (n > 1) {
    size_t m = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
      t[m++] = b.fma(t[i + 1], xp, t[i]);
    if (n % 2)
      t[m++] = t[n - 1];
    n = m;
    if (n > 1)
      xp = b.mul(xp, xp);
  }
  return t[0];
}

/// e^x. Steps:
///  1. Clamp x to [-104, 89]: beyond, e^x is 0 or +inf in f32 and the clamped value gives it
///     too; NaN passes (the compares are ordered). With `bounded` (the caller guarantees
///     x <= 43 or NaN: sigmoid's and tanh's e^-|x|, erf's tail) only the lower clamp is needed.
///  2. n = round(x / ln2) by adding 1.5*2^23 (the integer lands in the low mantissa bits, so
///     no float->int conversion, which LLVM leaves undefined for NaN), r = x - n*ln2 with ln2
///     in two parts (Cody-Waite): exact high product, |r| <= ln2/2.
///  3. e^r = 1 + r + r^2 * p(r), p a degree-5 minimax polynomial (SLEEF's expf), evaluated by
///     Estrin's scheme (three pairs, then two steps in r^2): the same accuracy as Horner's rule
///     with half its chain of dependent FMAs, which is what bounds a vectorized loop of exp
///     (or of sigmoid, SiLU's half) once the out-of-order window is full.
///  4. Scale by 2^n exactly, with the one rounding in the last multiply so that denormal
///     results are correctly formed: as 2^h * 2^(n-h), h = round(x / (2 ln2)), each factor
///     built in the exponent bits (both stay normal for n in [-150, 128]); with `bounded`
///     (n in [-150, 63]) as one factor 2^(n+64), exact, times the constant 2^-64.
template <class B>
typename B::F expCore(B &b, typename B::F x, const typename B::F *lo, bool bounded = false) {
  using F = typename B::F;
  using I = typename B::I;
  if (!bounded)
    x = b.select(b.gt(x, b.f(89.0)), b.f(89.0), x);
  x = b.select(b.lt(x, b.f(-104.0)), b.f(-104.0), x);
  const double shifter = 12582912.0; // 1.5 * 2^23
  F k = b.fma(x, b.f(1.44269504088896341), b.f(shifter));
  F n = b.sub(k, b.f(shifter));
  F r = b.fma(n, b.f(-0.693145751953125), x);
  r = b.fma(n, b.f(-1.428606765330187045e-06), r);
  if (lo) // the low part of a double-float argument (pow)
    r = b.add(r, *lo);
  F r2 = b.mul(r, r);
  F p01 = b.fma(b.f(0.000198527617612853646278381), r, b.f(0.00139304355252534151077271));
  F p23 = b.fma(b.f(0.00833336077630519866943359), r, b.f(0.0416664853692054748535156));
  F p45 = b.fma(b.f(0.166666671633720397949219), r, b.f(0.5));
  F p = b.fma(b.fma(p01, r2, p23), r2, p45);
  F er = b.add(b.f(1.0), b.fma(r2, p, r));
  if (bounded) {
    // The bits of k are the shifter's plus n in its low mantissa bits; (bits + 127 + 64) << 23
    // is 2^(n+64) (the shifter's own bits are a multiple of 2^22 and shift out).
    F s = b.fromBits(b.shl(b.iadd(b.bits(k), b.u(127 + 64)), 23));
    return b.mul(b.mul(er, s), b.f(0x1p-64));
  }
  // 2^h and 2^(n-h) with h = round(n/2) from a second shifter: the bits of k and kh are
  // those of the shifter plus n and h, so (bits + 127) << 23 is the power of two (the
  // shifter's bits are a multiple of 2^22 and shift out) and bits(k) - bits(kh) is n - h.
  I kh = b.bits(b.fma(x, b.f(0.721347520444481703), b.f(shifter)));
  F s1 = b.fromBits(b.shl(b.iadd(kh, b.u(127)), 23));
  F s2 = b.fromBits(b.shl(b.iadd(b.isub(b.bits(k), kh), b.u(127)), 23));
  return b.mul(b.mul(er, s1), s2);
}

/// e^x for x <= 43 (or NaN) only: see expCore's `bounded`.
template <class B> typename B::F expBounded(B &b, typename B::F x) {
  return expCore(b, x, nullptr, /*bounded=*/true);
}

template <class B> typename B::F exp(B &b, typename B::F x) {
  return expCore(b, x, nullptr);
}

/// 1/(1+e^-x): with t = e^-|x| in (0, 1], q = 1/(1+t) is the result for x >= 0 and t*q for
/// x < 0, so nothing overflows and tiny results keep their precision.
template <class B> typename B::F sigmoid(B &b, typename B::F x) {
  using F = typename B::F;
  F t = expBounded(b, b.neg(b.abs(x)));
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
  F t = expBounded(b, b.mul(a, b.f(-2.0)));
  F big = b.div(b.sub(b.f(1.0), t), b.add(b.f(1.0), t));
  big = b.select(b.lt(x, b.f(0.0)), b.neg(big), big);
  return b.select(b.lt(a, b.f(0.625)), small, big);
}

/// erf x, odd: for |x| < 1, x + x p(x^2) (p of degree 6, fitted for relative error 1e-9); for
/// |x| >= 1, 1 - e^q(|x|) with q ~ log(erfc) of degree 6 on [1, 4], fitted for the error of
/// the result (1e-9; q may be as loose as erf is close to 1), |x| clamped to 4 (erf is 1 in f32
/// from 3.92). Fits: near-minimax by iteratively reweighted least squares on Chebyshev nodes.
/// Both polynomials by Estrin's scheme: erf is GELU's, fused after a GEMM, where the depth of
/// the chain is what the loop pays.
template <class B> typename B::F erf(B &b, typename B::F x) {
  using F = typename B::F;
  F a = b.abs(x);
  F s = b.mul(x, x);
  F p = estrin(b, s,
               {7.88910890503619e-05, -0.0008020838099545707, 0.005189534982638105,
                -0.026854444407644576, 0.11283600171959471, -0.37612627135599763,
                0.12837916591370072});
  F small = b.fma(x, p, x);
  F c = b.select(b.gt(a, b.f(4.0)), b.f(4.0), a);
  F q = estrin(b, c,
               {0.00018557752492720514, -0.002939640857898329, 0.021805448967872954,
                -0.10303763447374065, -0.6382253792054668, -1.127040210973826,
                -0.000353677460867383});
  F big = b.sub(b.f(1.0), expBounded(b, q)); // q < -1.8 on [1, 4]
  big = b.select(b.lt(x, b.f(0.0)), b.neg(big), big);
  return b.select(b.lt(a, b.f(1.0)), small, big);
}

/// x^y. Steps:
///  1. |x| = m * 2^e with m in [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first; e comes
///     out as a float through the 1.5*2^23 shifter, no int->float conversion).
///  2. log|x| = e ln2 + 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716, as a double-float: e*ln2
///     (ln2 in two parts, the high product exact), 2s and (2/3) s^3 (itself a double-float)
///     summed exactly, the series' rest s^5 (2/5 + ... + 2/13 s^8) in f32 (under 2e-4 of it).
///  3. y log|x| as a double-float (the FMA gives the product's error), then e^hi * e^lo with
///     expCore's reduction taking the low part (0 when hi is beyond the f32 range).
///  4. Special cases, in C99's order: a negative x takes the sign of an odd integer y (NaN for
///     a non-integer y); y = +-inf gives 1 for |x| = 1, else +inf or +0 by |x| < 1 and y's sign;
///     x = +-0 or +-inf gives +0 or +inf (by the signs of y and of log|x|), signed for odd y;
///     NaN in either operand gives NaN; except that x^0 = 1 and 1^y = 1 for every x and y.
template <class B> typename B::F pow(B &b, typename B::F x, typename B::F y) {
  using F = typename B::F;
  using I = typename B::I;
  using M = typename B::M;
  const double shifter = 12582912.0; // 1.5 * 2^23
  F a = b.abs(x);
  M denormal = b.lt(a, b.f(0x1p-126));
  F as = b.select(denormal, b.mul(a, b.f(0x1p23)), a);
  I bits = b.bits(as);
  F biased = b.sub(b.fromBits(b.iadd(b.shr(bits, 23), b.bits(b.f(shifter)))), b.f(shifter + 127));
  F e = b.sub(biased, b.select(denormal, b.f(23.0), b.f(0.0)));
  F m = b.fromBits(b.ior(b.iand(bits, b.u(0x7fffff)), b.u(0x3f800000)));
  M high = b.gt(m, b.f(1.41421356237309505));
  m = b.select(high, b.mul(m, b.f(0.5)), m);
  e = b.select(high, b.add(e, b.f(1.0)), e);
  // s = (m - 1) / (m + 1) as sh + sl: m - 1 is exact, m + 1 = dh + dl (two-sum).
  F num = b.sub(m, b.f(1.0));
  F dh = b.add(m, b.f(1.0));
  F dl = b.sub(m, b.sub(dh, b.f(1.0)));
  F sh = b.div(num, dh);
  F sl = b.div(b.sub(b.fma(b.neg(sh), dh, num), b.mul(sh, dl)), dh);
  // The series' leading tail term (2/3) s^3 (up to 1% of log|x|, where its error would be
  // multiplied by y) in double-float: s^3 to first order in sl, times 2/3 in two parts.
  F zh = b.mul(sh, sh);
  F zl = b.fma(sh, sh, b.neg(zh));
  F ch = b.mul(sh, zh);
  F cl = b.add(b.fma(sh, zh, b.neg(ch)), b.fma(sh, zl, b.mul(b.mul(zh, sl), b.f(3.0))));
  const double twoThirds = 2.0 / 3, twoThirdsHi = static_cast<float>(twoThirds);
  F th = b.mul(ch, b.f(twoThirdsHi));
  F tl = b.fma(ch, b.f(twoThirds - twoThirdsHi),
               b.fma(cl, b.f(twoThirdsHi), b.fma(ch, b.f(twoThirdsHi), b.neg(th))));
  // The rest, s^5 (2/5 + 2/7 s^2 + ... + 2/13 s^8), is under 2e-4 of the sum: f32.
  F rest = b.mul(b.mul(ch, zh), horner(b, zh, {2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5}));
  // e ln2 + 2 sh + th exactly as hh + he (two two-sums), then everything else into the low part.
  F eh = b.mul(e, b.f(0.693145751953125));
  F twoS = b.add(sh, sh);
  F h1 = b.add(eh, twoS);
  F b1 = b.sub(h1, eh);
  F e1 = b.add(b.sub(eh, b.sub(h1, b1)), b.sub(twoS, b1));
  F hh = b.add(h1, th);
  F b2 = b.sub(hh, h1);
  F e2 = b.add(b.sub(h1, b.sub(hh, b2)), b.sub(th, b2));
  F lo = b.add(b.add(b.add(e1, e2), b.add(tl, rest)),
               b.fma(e, b.f(1.428606765330187045e-06), b.add(sl, sl)));
  F lh = b.add(hh, lo);
  F ll = b.sub(lo, b.sub(lh, hh));
  // y log|x| = ph + pl.
  F ph = b.mul(y, lh);
  F pl = b.fma(y, ll, b.fma(y, lh, b.neg(ph)));
  pl = b.select(b.lt(b.abs(ph), b.f(104.0)), pl, b.f(0.0));
  F r = expCore(b, ph, &pl);
  // 4. Special cases.
  F half = b.mul(y, b.f(0.5));
  M yInt = b.eq(b.floor(y), y);
  M yOdd = b.mand(b.mand(yInt, b.lt(b.abs(y), b.f(0x1p24))), b.mnot(b.eq(b.floor(half), half)));
  F inf = b.f(INFINITY), nan = b.f(NAN), zero = b.f(0.0), one = b.f(1.0);
  M xNeg = b.lt(x, zero);
  r = b.select(xNeg, b.select(yInt, b.select(yOdd, b.neg(r), r), nan), r);
  M yInf = b.eq(b.abs(y), inf);
  M below = b.lt(a, one), yNeg = b.lt(y, zero);
  M same = b.mor(b.mand(below, yNeg), b.mand(b.mnot(below), b.mnot(yNeg)));
  r = b.select(yInf, b.select(b.eq(a, one), one, b.select(same, inf, zero)), r);
  M xZero = b.eq(a, zero);
  // x = +-0 or +-inf: +inf for (0, y < 0) and (inf, y > 0), else +0; x's sign for an odd y.
  F mag = b.select(b.mor(b.mand(xZero, yNeg), b.mand(b.mnot(xZero), b.gt(y, zero))), inf, zero);
  F signedMag = b.fromBits(b.ior(b.bits(mag), b.iand(b.bits(x), b.u(0x80000000u))));
  r = b.select(b.mor(xZero, b.eq(a, inf)), b.select(yOdd, signedMag, mag), r);
  M anyNaN = b.mor(b.mnot(b.eq(x, x)), b.mnot(b.eq(y, y)));
  r = b.select(anyNaN, nan, r);
  return b.select(b.mor(b.eq(y, zero), b.eq(x, one)), one, r);
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
  M eq(F a, F b) const { return a == b; }
  M mand(M a, M b) const { return a && b; }
  M mor(M a, M b) const { return a || b; }
  M mnot(M a) const { return !a; }
  F floor(F a) const { return std::floor(a); }
  I shr(I a, int s) const { return a >> s; }
  I iand(I a, I b) const { return a & b; }
  I ior(I a, I b) const { return a | b; }
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
inline float powF32(float x, float y) {
  ScalarBuilder b;
  return pow(b, x, y);
}

} // namespace nnc::fastmath
