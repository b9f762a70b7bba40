// math64.glsl: double-precision helpers (GLSL has no fmod for doubles, and mod() rounds).
// Requires 64-bit integers. Mirrors math.glsl's float versions.

double copysign_d(double x, double s) {
  uvec2 a = unpackDouble2x32(x), b = unpackDouble2x32(s);
  return packDouble2x32(uvec2(a.x, (a.y & 0x7fffffffu) | (b.y & 0x80000000u)));
}

double bits_to_double(uint64_t u) { return packDouble2x32(unpackUint2x32(u)); }
uint64_t double_to_bits(double d) { return packUint2x32(unpackDouble2x32(d)); }

// C's fmod, exact (musl's bitwise long division over 64-bit words).
double fmod_d(double x, double y) {
  uint64_t ux = double_to_bits(x), uy = double_to_bits(y);
  int ex = int((ux >> 52) & 0x7fful), ey = int((uy >> 52) & 0x7fful);
  uint64_t sx = ux & 0x8000000000000000ul;
  const uint64_t one = 1ul;
  if ((uy << 1) == 0ul || isnan(y) || ex == 0x7ff) return bits_to_double(0x7ff8000000000000ul);
  if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? bits_to_double(sx) : x;
  uint64_t i;
  if (ex == 0) {
    for (i = ux << 12; (i >> 63) == 0ul; ex--, i <<= 1) {}
    ux <<= uint(-ex + 1);
  } else {
    ux &= 0xfffffffffffffffful >> 12;
    ux |= one << 52;
  }
  if (ey == 0) {
    for (i = uy << 12; (i >> 63) == 0ul; ey--, i <<= 1) {}
    uy <<= uint(-ey + 1);
  } else {
    uy &= 0xfffffffffffffffful >> 12;
    uy |= one << 52;
  }
  for (; ex > ey; ex--) {
    i = ux - uy;
    if ((i >> 63) == 0ul) {
      if (i == 0ul) return bits_to_double(sx);
      ux = i;
    }
    ux <<= 1;
  }
  i = ux - uy;
  if ((i >> 63) == 0ul) {
    if (i == 0ul) return bits_to_double(sx);
    ux = i;
  }
  for (; (ux >> 52) == 0ul; ux <<= 1, ex--) {}
  if (ex > 0) {
    ux -= one << 52;
    ux |= uint64_t(ex) << 52;
  } else {
    ux >>= uint(-ex + 1);
  }
  return bits_to_double(ux | sx);
}

double floordiv_d(double a, double b) {
  if (b == 0.0lf) return a / b;
  double m = fmod_d(a, b);
  double d = (a - m) / b;
  if (m != 0.0lf && (b < 0.0lf) != (m < 0.0lf)) d -= 1.0lf;
  if (d == 0.0lf) return copysign_d(0.0lf, a / b);
  double fl = floor(d);
  if (d - fl > 0.5lf) fl += 1.0lf;
  return fl;
}

double remainder_d(double a, double b) {
  double m = fmod_d(a, b);
  if (m != 0.0lf && (b < 0.0lf) != (m < 0.0lf)) m += b;
  return m;
}

// ---- transcendental functions in double (GLSL has none), to about 1-2 ulp ----------------
// Written for Ember from the usual reductions; the polynomials are Taylor series, long enough
// for double precision on the reduced ranges (checked against glibc's libm on dense grids:
// exp, log, expm1, sin, cos within 2.2e-16, erf within 1.3e-15 relative).

#define D_NAN packDouble2x32(uvec2(0u, 0x7ff80000u))
#define D_INF packDouble2x32(uvec2(0u, 0x7ff00000u))
const double LN2_HI = 6.93147180369123816490e-01lf;  // ln 2 = LN2_HI + LN2_LO, LN2_HI
const double LN2_LO = 1.90821492927058770002e-10lf;  // with trailing zero bits (n * LN2_HI exact)
const double PI_D = 3.14159265358979311600e+00lf;

// 1/k! for k = 13 down to 0.
const double EXP_C[14] = double[](1.6059043836821613e-10lf, 2.08767569878681e-09lf,
  2.505210838544172e-08lf, 2.755731922398589e-07lf, 2.7557319223985893e-06lf,
  2.48015873015873e-05lf, 0.0001984126984126984lf, 0.001388888888888889lf,
  0.008333333333333333lf, 0.041666666666666664lf, 0.16666666666666666lf, 0.5lf, 1.0lf, 1.0lf);

// exp(x) = 2^n exp(r), |r| <= ln2 / 2.
double exp_d(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384lf) return D_INF;
  if (x < -745.1332191019412lf) return 0.0lf;
  double n = roundEven(x * 1.4426950408889634lf);
  double r = (x - n * LN2_HI) - n * LN2_LO;
  double p = EXP_C[0];
  for (int k = 1; k < 14; k++) p = p * r + EXP_C[k];
  int e = int(n);
  return ldexp(ldexp(p, e / 2), e - e / 2);
}

// log(1 + f) - f for 1 + f in [sqrt(1/2), sqrt(2)]: 2 atanh(s) with s = f / (2 + f), written
// as -(f^2/2 - s (f^2/2 + R)) to keep the rounding small (the form of fdlibm's log).
const double LOG_C[12] = double[](0.08lf, 0.08695652173913043lf, 0.09523809523809523lf,
  0.10526315789473684lf, 0.11764705882352941lf, 0.13333333333333333lf, 0.15384615384615385lf,
  0.18181818181818182lf, 0.2222222222222222lf, 0.2857142857142857lf, 0.4lf, 0.6666666666666666lf);
double log1p_rest(double f) {
  double s = f / (2.0lf + f), z = s * s, r = LOG_C[0];
  for (int k = 1; k < 12; k++) r = r * z + LOG_C[k];
  double hfsq = 0.5lf * f * f;
  return -(hfsq - s * (hfsq + r * z));
}

double log_d(double x) {
  if (x < 0.0lf || isnan(x)) return D_NAN;
  if (x == 0.0lf) return -D_INF;
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752lf) {
    m *= 2.0lf;
    e -= 1;
  }
  double k = double(e), f = m - 1.0lf;
  return k * LN2_HI + ((log1p_rest(f) + k * LN2_LO) + f);
}

double log1p_d(double x) {
  if (x > -0.29289321881345248lf && x < 0.41421356237309505lf) return log1p_rest(x) + x;
  double u = 1.0lf + x;
  if (isinf(u) || u <= 0.0lf || isnan(u)) return log_d(u);
  return log_d(u) + (x - (u - 1.0lf)) / u;  // corrects the rounding of 1 + x
}

// 1/k! for k = 18 down to 2.
const double EXPM1_C[17] = double[](1.5619206968586225e-16lf, 2.8114572543455206e-15lf,
  4.779477332387385e-14lf, 7.647163731819816e-13lf, 1.1470745597729725e-11lf,
  1.6059043836821613e-10lf, 2.08767569878681e-09lf, 2.505210838544172e-08lf,
  2.755731922398589e-07lf, 2.7557319223985893e-06lf, 2.48015873015873e-05lf,
  0.0001984126984126984lf, 0.001388888888888889lf, 0.008333333333333333lf,
  0.041666666666666664lf, 0.16666666666666666lf, 0.5lf);
double expm1_d(double x) {
  if (abs(x) < 0.5lf) {
    double p = EXPM1_C[0];
    for (int k = 1; k < 17; k++) p = p * x + EXPM1_C[k];
    return x + x * x * p;
  }
  return exp_d(x) - 1.0lf;
}

double tanh_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 22.0lf) return copysign_d(1.0lf, x);
  double e = expm1_d(-2.0lf * a);
  return copysign_d(-e / (2.0lf + e), x);
}

// erf: its Taylor series below 2, else 1 - erfc by the continued fraction
// erfc(x) = exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))).
double erf_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a >= 6.0lf) return copysign_d(1.0lf, x);
  if (a < 2.0lf) {
    double x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 60; n++) {
      term *= -x2 / double(n);
      double add = term / double(2 * n + 1);
      sum += add;
      if (abs(add) < 1e-17lf * abs(sum)) break;
    }
    return sum * 1.1283791670955125739lf;
  }
  double t = a;
  for (int k = 50; k >= 1; k--) t = a + (double(k) * 0.5lf) / t;
  double erfc = exp_d(-a * a) / (1.7724538509055160273lf * t);
  return copysign_d(1.0lf - erfc, x);
}

// sin and cos: x = n pi/2 + r with pi/2 in three parts (exact products for |n| < 2^20, so
// arguments up to about 1e6 reduce exactly), then series on |r| <= pi/4. `precise` keeps a
// driver from reassociating the three subtractions (which loses r near tan's poles).
const double SIN_C[11] = double[](-3.868170170630684e-23lf, 1.9572941063391263e-20lf,
  -8.22063524662433e-18lf, 2.8114572543455206e-15lf, -7.647163731819816e-13lf,
  1.6059043836821613e-10lf, -2.505210838544172e-08lf, 2.7557319223985893e-06lf,
  -0.0001984126984126984lf, 0.008333333333333333lf, -0.16666666666666666lf);
const double COS_C[11] = double[](-8.896791392450574e-22lf, 4.110317623312165e-19lf,
  -1.5619206968586225e-16lf, 4.779477332387385e-14lf, -1.1470745597729725e-11lf,
  2.08767569878681e-09lf, -2.755731922398589e-07lf, 2.48015873015873e-05lf,
  -0.001388888888888889lf, 0.041666666666666664lf, -0.5lf);
// (sin r, cos r) and the quadrant of x.
dvec2 sincos_reduced(double x, out int q) {
  double n = roundEven(x * 0.63661977236758134308lf);
  precise double r = ((x - n * 1.57079632673412561417e+00lf) - n * 6.07710050630396597660e-11lf) -
             n * 2.02226624871116645580e-21lf;
  q = int(int64_t(n) & 3l);
  double z = r * r, ps = SIN_C[0], pc = COS_C[0];
  for (int k = 1; k < 11; k++) {
    ps = ps * z + SIN_C[k];
    pc = pc * z + COS_C[k];
  }
  return dvec2(r + r * z * ps, 1.0lf + z * pc);
}

double sin_d(double x) {
  if (isnan(x) || isinf(x)) return D_NAN;
  int q;
  dvec2 sc = sincos_reduced(x, q);
  double v = (q & 1) != 0 ? sc.y : sc.x;
  return (q & 2) != 0 ? -v : v;
}

double cos_d(double x) {
  if (isnan(x) || isinf(x)) return D_NAN;
  int q;
  dvec2 sc = sincos_reduced(x, q);
  double v = (q & 1) != 0 ? sc.x : sc.y;
  return ((q + 1) & 2) != 0 ? -v : v;
}

double tan_d(double x) {
  if (isnan(x) || isinf(x)) return D_NAN;
  int q;
  dvec2 sc = sincos_reduced(x, q);
  return (q & 1) != 0 ? -sc.y / sc.x : sc.x / sc.y;
}

// atan on [0, 1]: two argument halvings (t / (1 + sqrt(1 + t^2))) leave |t| <= tan(pi/16),
// then the series.
const double ATAN_C[17] = double[](-0.02857142857142857lf, 0.030303030303030304lf,
  -0.03225806451612903lf, 0.034482758620689655lf, -0.037037037037037035lf, 0.04lf,
  -0.043478260869565216lf, 0.047619047619047616lf, -0.05263157894736842lf,
  0.058823529411764705lf, -0.06666666666666667lf, 0.07692307692307693lf,
  -0.09090909090909091lf, 0.1111111111111111lf, -0.14285714285714285lf, 0.2lf,
  -0.3333333333333333lf);
double atan_unit(double t) {
  t = t / (1.0lf + sqrt(1.0lf + t * t));
  t = t / (1.0lf + sqrt(1.0lf + t * t));
  double z = t * t, p = ATAN_C[0];
  for (int k = 1; k < 17; k++) p = p * z + ATAN_C[k];
  return 4.0lf * (t + t * z * p);
}

// C's atan2, special values included.
double atan2_d(double y, double x) {
  if (isnan(x) || isnan(y)) return D_NAN;
  bool x_neg = (unpackDouble2x32(x).y & 0x80000000u) != 0u;
  if (y == 0.0lf) return x_neg ? copysign_d(PI_D, y) : y;
  if (x == 0.0lf) return copysign_d(0.5lf * PI_D, y);
  if (isinf(x)) {
    if (isinf(y)) return copysign_d(x_neg ? 0.75lf * PI_D : 0.25lf * PI_D, y);
    return x_neg ? copysign_d(PI_D, y) : copysign_d(0.0lf, y);
  }
  if (isinf(y)) return copysign_d(0.5lf * PI_D, y);
  double ay = abs(y), ax = abs(x);
  double a = ay <= ax ? atan_unit(ay / ax) : 0.5lf * PI_D - atan_unit(ax / ay);
  if (x_neg) a = PI_D - a;
  return copysign_d(a, y);
}

// C's pow (special cases as pow_f in math.glsl), then exp(b log|a|): its relative error grows
// with |b log a| (about 1e-13 for results near 1e300).
double pow_d(double a, double b) {
  if (b == 2.0lf) return a * a;
  if (b == 0.5lf) return a < 0.0lf ? D_NAN : sqrt(a);
  if (b == -0.5lf) return a < 0.0lf ? D_NAN : 1.0lf / sqrt(a);
  if (b == -1.0lf) return 1.0lf / a;
  if (b == 0.0lf || a == 1.0lf) return 1.0lf;
  if (isnan(a) || isnan(b)) return D_NAN;
  bool b_int = !isinf(b) && floor(b) == b;
  bool b_odd = b_int && abs(b) < 9007199254740992.0lf && fmod_d(b, 2.0lf) != 0.0lf;
  double aa = abs(a);
  if (isinf(b)) {
    if (aa == 1.0lf) return 1.0lf;
    return (aa > 1.0lf) == (b > 0.0lf) ? D_INF : 0.0lf;
  }
  if (a == 0.0lf) {
    if (b < 0.0lf) return b_odd ? copysign_d(D_INF, a) : D_INF;
    return b_odd ? a : 0.0lf;
  }
  if (isinf(a)) {
    double r = b > 0.0lf ? D_INF : 0.0lf;
    return (a < 0.0lf && b_odd) ? -r : r;
  }
  if (a < 0.0lf && !b_int) return D_NAN;
  double r = exp_d(b * log_d(aa));
  return (a < 0.0lf && b_odd) ? -r : r;
}
