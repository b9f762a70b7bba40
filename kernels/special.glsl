// special.glsl: the float functions of kernels/special.comp (inverse trigonometric and
// hyperbolic, log2, log10, exp2, erfc, erfinv, lgamma, digamma), built on math.glsl's exp_f,
// log_f, log1p_f and atan2_f rather than GLSL's built-ins, which are only accurate in absolute
// terms on some drivers. Edge values follow the CPU (C's libm; PyTorch's digamma poles).

const float LN2_F = 0.693147180559945309;
const float HALF_LOG_2PI_F = 0.918938533204672742;

float asin_f(float x) {
  if (isnan(x) || abs(x) > 1.0) return F_NAN;
  return atan2_f(x, sqrt((1.0 - x) * (1.0 + x)));
}

float acos_f(float x) {
  if (isnan(x) || abs(x) > 1.0) return F_NAN;
  return atan2_f(sqrt((1.0 - x) * (1.0 + x)), x);
}

float sinh_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x), r;
  if (a < 1.0) {
    float e = expm1_f(a);  // no cancellation for small a
    r = 0.5 * (e + e / (e + 1.0));
  } else if (a < 88.0) {
    float e = exp_f(a);
    r = 0.5 * (e - 1.0 / e);
  } else {
    float h = exp_f(0.5 * a);  // e^a itself would overflow first
    r = (0.5 * h) * h;
  }
  return copysign_f(r, x);
}

float cosh_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a < 88.0) {
    float e = exp_f(a);
    return 0.5 * (e + 1.0 / e);
  }
  float h = exp_f(0.5 * a);
  return (0.5 * h) * h;
}

float asinh_f(float x) {
  if (isnan(x) || isinf(x)) return x;
  float a = abs(x);
  float r = a > 4096.0 ? log_f(a) + LN2_F : log1p_f(a + a * a / (1.0 + sqrt(1.0 + a * a)));
  return copysign_f(r, x);
}

float acosh_f(float x) {
  if (isnan(x) || x < 1.0) return F_NAN;
  if (isinf(x)) return x;
  if (x > 4096.0) return log_f(x) + LN2_F;
  float t = x - 1.0;  // exact near 1
  return log1p_f(t + sqrt(2.0 * t + t * t));
}

float atanh_f(float x) {
  float a = abs(x);
  if (isnan(x) || a > 1.0) return F_NAN;
  if (a == 1.0) return copysign_f(F_INF, x);
  return copysign_f(0.5 * log1p_f(2.0 * a / (1.0 - a)), x);
}

// log2 from log_f's reduction, so that powers of two come out exact.
float log2_f(float x) {
  if (x < 0.0 || isnan(x)) return F_NAN;
  if (x == 0.0) return -F_INF;
  if (isinf(x)) return x;
  int e;
  float m = frexp(x, e);
  if (m == 0.0) return -F_INF;
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  return float(e) + log1p_kernel(m - 1.0) * 1.44269504088896341;
}

float log10_f(float x) { return log_f(x) * 0.434294481903251828; }

// 2^x = 2^n e^(r ln 2), n the nearest integer: exact for integral x.
float exp2_f(float x) {
  if (isnan(x)) return x;
  if (x >= 128.0) return F_INF;
  if (x < -150.0) return 0.0;
  float n = roundEven(x);
  int k = int(n);
  return ldexp(ldexp(exp_f((x - n) * LN2_F), k / 2), k - k / 2);
}

// erfc: 1 - erf below 1/2, else Numerical Recipes' erfcc (relative error below 1.2e-7), with
// exp(-z^2) split as exp(-hi) (1 - lo), z^2 = hi + lo, so the tail keeps its relative accuracy.
float erfc_f(float x) {
  if (isnan(x)) return x;
  float z = abs(x);
  if (z < 0.5) return 1.0 - erf_f(x);
  float r = 0.0;
  if (z < 10.1) {
    float t = 1.0 / (1.0 + 0.5 * z);
    float p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277))))))));
    float hi = z * z, lo = fma(z, z, -hi);
    r = t * exp_f(-hi) * exp_f(p) * (1.0 - lo);
  }
  return x < 0.0 ? 2.0 - r : r;
}

// erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function", 2010).
float erfinv_f(float y) {
  if (!(abs(y) <= 1.0)) return F_NAN;
  if (abs(y) == 1.0) return copysign_f(F_INF, y);
  if (y == 0.0) return y;
  float w = -log_f((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p * y;
}

// lgamma(1 + t) for |t| <= 1/2: its Taylor series -gamma t + sum_k (-1)^k zeta(k)/k t^k, to
// t^24 (error below 3e-9). Near the roots 1 and 2 this keeps lgamma's relative accuracy, which
// a difference of large logarithms (Stirling's series) would lose.
const float LGAMMA1P_C[24] = float[](
  4.166666915e-02, -4.347826605e-02, 4.545455629e-02, -4.761907033e-02, 5.000004770e-02,
  -5.263167938e-02, 5.555576763e-02, -5.882397866e-02, 6.250095514e-02, -6.666870588e-02,
  7.143294630e-02, -7.693251641e-02, 8.335384055e-02, -9.095401715e-02, 1.000994575e-01,
  -1.113342659e-01, 1.255096695e-01, -1.440498968e-01, 1.695571770e-01, -2.073855510e-01,
  2.705808084e-01, -4.006856344e-01, 8.224670334e-01, -5.772156649e-01);
float lgamma1p_series(float t) {
  float r = LGAMMA1P_C[0];
  for (int k = 1; k < 24; k++) r = r * t + LGAMMA1P_C[k];
  return r * t;
}

// lgamma for x > 0: the series on [0.5, 1.5] (through lgamma(x + 1) - log x below), the
// recurrence down to [1.5, 2.5] (lgamma(2 + t) = lgamma(1 + t) + log1p(t)) up to 8, and
// Stirling's series from 8 on, where lgamma is large.
float lgamma_pos_f(float x) {
  if (x < 0.5) return lgamma1p_series(x) - log_f(x);
  if (x <= 1.5) return lgamma1p_series(x - 1.0);
  if (x < 8.0) {
    float prod = 1.0, z = x;
    for (int k = 0; k < 7 && z > 2.5; k++) {
      z -= 1.0;  // exact
      prod *= z;
    }
    float t = z - 2.0;
    return lgamma1p_series(t) + log1p_f(t) + log_f(prod);
  }
  if (isinf(x)) return x;
  float f = 1.0 / (x * x);
  float series = (1.0 / 12.0 + f * (-1.0 / 360.0 + f * (1.0 / 1260.0 + f * (-1.0 / 1680.0)))) / x;
  return (x - 0.5) * log_f(x) - x + HALF_LOG_2PI_F + series;
}

// sin and cos on [-pi/2, pi/2] by their Taylor series (error below 1e-9): NVIDIA's built-ins
// hold only in absolute terms (about 2^-21), so a small argument's sine would lose digits.
float sin_half_pi(float a) {
  float a2 = a * a;
  return a * (1.0 + a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (1.0 / 362880.0 +
         a2 * (-1.0 / 39916800.0 + a2 * (1.0 / 6227020800.0)))))));
}
float cos_half_pi(float a) {
  float a2 = a * a;
  return 1.0 + a2 * (-0.5 + a2 * (1.0 / 24.0 + a2 * (-1.0 / 720.0 + a2 * (1.0 / 40320.0 +
         a2 * (-1.0 / 3628800.0 + a2 * (1.0 / 479001600.0 + a2 * (-1.0 / 87178291200.0)))))));
}

// lgamma: +inf at the poles and at -inf, reflection below 0 (the argument of sin reduced to
// [-1/2, 1/2] first, where it is exact).
float lgamma_f(float x) {
  if (isnan(x)) return x;
  if (isinf(x)) return F_INF;
  if (x > 0.0) return lgamma_pos_f(x);
  if (x == floor(x)) return F_INF;
  float s = abs(sin_half_pi(M_PI_F * (x - round(x))));
  return log_f(M_PI_F / s) - lgamma_pos_f(1.0 - x);
}

// digamma as PyTorch: -inf at +0 (+inf at -0), NaN at the negative integers; reflection
// below 0 (pi cot(pi x) from the series above: x - round(x) is within [-1/2, 1/2]), the
// recurrence up to 10, then the asymptotic series.
float digamma_f(float x) {
  if (x == 0.0) return copysign_f(F_INF, -x);
  if (isnan(x)) return x;
  float r = 0.0;
  if (x < 0.0) {
    if (isinf(x) || x == floor(x)) return F_NAN;
    float fr = M_PI_F * (x - round(x));
    r = -M_PI_F * cos_half_pi(fr) / sin_half_pi(fr);
    x = 1.0 - x;
  }
  for (int k = 0; k < 10 && x < 10.0; k++) {
    r -= 1.0 / x;
    x += 1.0;
  }
  if (isinf(x)) return x;
  float f = 1.0 / (x * x);
  float t = f * (-1.0 / 12.0 + f * (1.0 / 120.0 + f * (-1.0 / 252.0 + f * (1.0 / 240.0))));
  return r + log_f(x) - 0.5 / x + t;
}
