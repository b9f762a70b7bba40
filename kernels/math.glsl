// math.glsl: float functions GLSL lacks or defines too loosely for Ember, written to match
// the CPU kernels (runtime/src/cpu/pointwise_float.c, C's libm) on edge cases: signed zeros,
// infinities, NaN, negative bases, exact remainders.

const float M_PI_F = 3.14159265358979323846;
#define F_INF uintBitsToFloat(0x7f800000u)
#define F_NAN uintBitsToFloat(0x7fc00000u)

float copysign_f(float x, float s) {
  return uintBitsToFloat((floatBitsToUint(x) & 0x7fffffffu) | (floatBitsToUint(s) & 0x80000000u));
}

// exp, log, log1p and expm1 to about 1 ulp, in float arithmetic: the GPU's exp and log are
// only accurate in absolute terms (lavapipe's log(1 + 1e-4) is off by 5e-4 relative), and the
// CPU's libm is correctly rounded. Reductions as in musl: exp(x) = 2^n exp(r), |r| <= ln2/2,
// with ln2 split in two; log(x) = k ln2 + log(1 + f), 1 + f in [sqrt(1/2), sqrt(2)].
float exp_f(float x) {
  if (isnan(x)) return x;
  if (x > 88.72283935546875) return F_INF;
  if (x < -103.97208) return 0.0;
  float n = roundEven(x * 1.44269504088896341);
  float r = x - n * 0.693145751953125;
  r = r - n * 1.428606765330187e-06;
  int k = int(n);
  return ldexp(ldexp(exp(r), k / 2), k - k / 2);  // two steps: 2^128 alone would overflow
}

// log(1 + f) for 1 + f in [sqrt(1/2), sqrt(2)] (musl's logf kernel).
float log1p_kernel(float f) {
  float s = f / (2.0 + f), z = s * s, w = z * z;
  float t1 = w * (0.40000972152 + w * 0.24279078841);
  float t2 = z * (0.66666662693 + w * 0.28498786688);
  float hfsq = 0.5 * f * f;
  return s * (hfsq + t2 + t1) - hfsq + f;
}

// C's log outside the domain too: NaN below 0, -inf at 0.
float log_f(float x) {
  if (x < 0.0 || isnan(x)) return F_NAN;
  if (x == 0.0) return -F_INF;
  if (isinf(x)) return x;
  int e;
  float m = frexp(x, e);
  if (m == 0.0) return -F_INF;  // a subnormal flushed to zero
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  float k = float(e);
  return (log1p_kernel(m - 1.0) + k * 9.0580006145e-06) + k * 6.9313812256e-01;
}

float sqrt_f(float x) { return x < 0.0 ? F_NAN : sqrt(x); }

float log1p_f(float x) {
  if (x > -0.29289321881 && x < 0.41421356237) return log1p_kernel(x);
  float u = 1.0 + x;
  if (isinf(u) || u <= 0.0 || isnan(u)) return log_f(u);
  return log_f(u) + (x - (u - 1.0)) / u;  // corrects the rounding of 1 + x
}

float expm1_f(float x) {
  if (abs(x) < 0.5) {  // Taylor to x^9: below half an ulp on this range
    float p = 2.75573192e-06;
    p = p * x + 2.48015873e-05;
    p = p * x + 1.98412698e-04;
    p = p * x + 1.38888889e-03;
    p = p * x + 8.33333333e-03;
    p = p * x + 4.16666667e-02;
    p = p * x + 1.66666667e-01;
    p = p * x + 0.5;
    return x + x * x * p;
  }
  return exp_f(x) - 1.0;
}

// tanh through expm1: exact sign and zero, no overflow for large |x|.
float tanh_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a > 9.0) return copysign_f(1.0, x);
  float e = expm1_f(-2.0 * a);
  return copysign_f(-e / (2.0 + e), x);
}

// erf with a maximum error below 1 ulp (N. Juffa's minimax approximation).
float erf_f(float a) {
  float t = abs(a), s = a * a, r;
  if (t > 0.927734375) {
    r = fma(-1.72853470e-5, t, 3.83197126e-4);
    float u = fma(-3.88396438e-3, t, 2.42546219e-2);
    r = fma(r, s, u);
    r = fma(r, t, -1.06777877e-1);
    r = fma(r, t, -6.34846687e-1);
    r = fma(r, t, -1.28717512e-1);
    r = fma(r, t, -t);
    r = 1.0 - exp_f(r);
    return copysign_f(r, a);
  }
  r = -5.96761703e-4;
  r = fma(r, s, 4.99119423e-3);
  r = fma(r, s, -2.67681349e-2);
  r = fma(r, s, 1.12819925e-1);
  r = fma(r, s, -3.76125336e-1);
  r = fma(r, s, 1.28379166e-1);
  return fma(r, a, a);
}

// C's pow: special cases first (C99 F.9.4.4), then exp2(b * log2|a|) with the sign of an odd
// integer power of a negative base. Exponents 2, 0.5, -0.5 and -1 are computed as the CPU's
// fast path does (x*x, sqrt, 1/sqrt, 1/x).
float pow_f(float a, float b) {
  if (b == 2.0) return a * a;
  if (b == 0.5) return sqrt_f(a);
  if (b == -0.5) return 1.0 / sqrt_f(a);
  if (b == -1.0) return 1.0 / a;
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return F_NAN;
  bool b_int = !isinf(b) && floor(b) == b;
  bool b_odd = b_int && mod(b, 2.0) != 0.0;
  float aa = abs(a);
  if (isinf(b)) {
    if (aa == 1.0) return 1.0;
    return (aa > 1.0) == (b > 0.0) ? F_INF : 0.0;
  }
  if (a == 0.0) {
    if (b < 0.0) return b_odd ? copysign_f(F_INF, a) : F_INF;
    return b_odd ? a : 0.0;
  }
  if (isinf(a)) {
    float r = b > 0.0 ? F_INF : 0.0;
    return (a < 0.0 && b_odd) ? -r : r;
  }
  if (a < 0.0 && !b_int) return F_NAN;
  float r = exp2(b * log2(aa));  // relative error grows with |b log2 a|
  return (a < 0.0 && b_odd) ? -r : r;
}

// C's atan2, including the signed zeros and infinities GLSL's atan(y, x) leaves undefined.
float atan2_f(float y, float x) {
  if (isnan(x) || isnan(y)) return F_NAN;
  bool x_neg = (floatBitsToUint(x) & 0x80000000u) != 0u;
  if (y == 0.0) return x_neg ? copysign_f(M_PI_F, y) : y;
  if (x == 0.0) return copysign_f(0.5 * M_PI_F, y);
  if (isinf(x)) {
    if (isinf(y)) return copysign_f(x_neg ? 0.75 * M_PI_F : 0.25 * M_PI_F, y);
    return x_neg ? copysign_f(M_PI_F, y) : copysign_f(0.0, y);
  }
  if (isinf(y)) return copysign_f(0.5 * M_PI_F, y);
  return atan(y, x);
}

// C's fmod, exact (musl's bitwise long division): GLSL's mod() is x - y * floor(x / y),
// which rounds.
float fmod_f(float x, float y) {
  uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
  int ex = int((ux >> 23) & 0xffu), ey = int((uy >> 23) & 0xffu);
  uint sx = ux & 0x80000000u;
  if ((uy << 1) == 0u || isnan(y) || ex == 0xff) return F_NAN;
  if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? uintBitsToFloat(sx) : x;
  uint i;
  if (ex == 0) {
    for (i = ux << 9; (i >> 31) == 0u; ex--, i <<= 1) {}
    ux <<= uint(-ex + 1);
  } else {
    ux &= 0xffffffffu >> 9;
    ux |= 1u << 23;
  }
  if (ey == 0) {
    for (i = uy << 9; (i >> 31) == 0u; ey--, i <<= 1) {}
    uy <<= uint(-ey + 1);
  } else {
    uy &= 0xffffffffu >> 9;
    uy |= 1u << 23;
  }
  for (; ex > ey; ex--) {
    i = ux - uy;
    if ((i >> 31) == 0u) {
      if (i == 0u) return uintBitsToFloat(sx);
      ux = i;
    }
    ux <<= 1;
  }
  i = ux - uy;
  if ((i >> 31) == 0u) {
    if (i == 0u) return uintBitsToFloat(sx);
    ux = i;
  }
  for (; (ux >> 23) == 0u; ux <<= 1, ex--) {}
  if (ex > 0) {
    ux -= 1u << 23;
    ux |= uint(ex) << 23;
  } else {
    ux >>= uint(-ex + 1);
  }
  return uintBitsToFloat(ux | sx);
}

// sin, cos and tan need their argument within [-pi, pi] on some GPUs (NVIDIA's built-ins lose
// three digits at x = 1e4): subtract the nearest multiple of 2 pi first, in three parts whose
// products with k are exact for |k| < 2^11 (Cody and Waite), so |x| up to about 1e4 keeps
// float accuracy.
float reduce_2pi(float x) {
  if (!(abs(x) > 3.14159265)) return x;  // small, or NaN
  if (abs(x) >= 12868.0) return x;       // beyond the exact range: left to the built-in
  precise float k = round(x * 0.15915494309189535);
  precise float r = ((x - k * 6.28125) - k * 0.0019350051879882812) - k * 3.019916050561733e-07;
  return r;
}

// Python's floor division and modulo, as the CPU computes them (c10::div_floor_floating).
float floordiv_f(float a, float b) {
  if (b == 0.0) return a / b;
  float m = fmod_f(a, b);
  float d = (a - m) / b;
  if (m != 0.0 && (b < 0.0) != (m < 0.0)) d -= 1.0;
  if (d == 0.0) return copysign_f(0.0, a / b);
  float fl = floor(d);
  if (d - fl > 0.5) fl += 1.0;
  return fl;
}

float remainder_f(float a, float b) {
  float m = fmod_f(a, b);
  if (m != 0.0 && (b < 0.0) != (m < 0.0)) m += b;
  return m;
}
