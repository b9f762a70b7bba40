// special64.glsl: the double functions of kernels/special.comp, built on math64.glsl's
// exp_d, log_d, log1p_d, expm1_d, atan2_d, erf_d and sin_d/cos_d (GLSL has no double
// transcendentals). Edge values follow the CPU (C's libm; PyTorch's digamma poles).

const double LN2_D = 0.69314718055994530942lf;
const double HALF_LOG_2PI_D = 0.91893853320467274178lf;

double asin_d(double x) {
  if (isnan(x) || abs(x) > 1.0lf) return D_NAN;
  return atan2_d(x, sqrt((1.0lf - x) * (1.0lf + x)));
}

double acos_d(double x) {
  if (isnan(x) || abs(x) > 1.0lf) return D_NAN;
  return atan2_d(sqrt((1.0lf - x) * (1.0lf + x)), x);
}

double sinh_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x), r;
  if (a < 1.0lf) {
    double e = expm1_d(a);
    r = 0.5lf * (e + e / (e + 1.0lf));
  } else if (a < 709.0lf) {
    double e = exp_d(a);
    r = 0.5lf * (e - 1.0lf / e);
  } else {
    double h = exp_d(0.5lf * a);
    r = (0.5lf * h) * h;
  }
  return copysign_d(r, x);
}

double cosh_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 709.0lf) {
    double e = exp_d(a);
    return 0.5lf * (e + 1.0lf / e);
  }
  double h = exp_d(0.5lf * a);
  return (0.5lf * h) * h;
}

double asinh_d(double x) {
  if (isnan(x) || isinf(x)) return x;
  double a = abs(x);
  double r = a > 268435456.0lf ? log_d(a) + LN2_D
                               : log1p_d(a + a * a / (1.0lf + sqrt(1.0lf + a * a)));
  return copysign_d(r, x);
}

double acosh_d(double x) {
  if (isnan(x) || x < 1.0lf) return D_NAN;
  if (isinf(x)) return x;
  if (x > 268435456.0lf) return log_d(x) + LN2_D;
  double t = x - 1.0lf;
  return log1p_d(t + sqrt(2.0lf * t + t * t));
}

double atanh_d(double x) {
  double a = abs(x);
  if (isnan(x) || a > 1.0lf) return D_NAN;
  if (a == 1.0lf) return copysign_d(D_INF, x);
  return copysign_d(0.5lf * log1p_d(2.0lf * a / (1.0lf - a)), x);
}

double log2_d(double x) {
  if (x < 0.0lf || isnan(x)) return D_NAN;
  if (x == 0.0lf) return -D_INF;
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752lf) {
    m *= 2.0lf;
    e -= 1;
  }
  double f = m - 1.0lf;
  return double(e) + (log1p_rest(f) + f) * 1.4426950408889634074lf;
}

double log10_d(double x) { return log_d(x) * 0.43429448190325182765lf; }

double exp2_d(double x) {
  if (isnan(x)) return x;
  if (x >= 1024.0lf) return D_INF;
  if (x < -1080.0lf) return 0.0lf;
  double n = roundEven(x);
  int k = int(n);
  return ldexp(ldexp(exp_d((x - n) * LN2_D), k / 2), k - k / 2);
}

// erfc: 1 - erf below 2, else the continued fraction erf_d uses, with exp(-a^2) split as
// exp(-hi) (1 - lo), a^2 = hi + lo, so the tail keeps its relative accuracy.
double erfc_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a < 2.0lf) return 1.0lf - erf_d(x);
  double r = 0.0lf;
  if (a < 27.3lf) {
    double t = a;
    for (int k = 80; k >= 1; k--) t = a + (double(k) * 0.5lf) / t;
    double hi = a * a, lo = fma(a, a, -hi);
    r = exp_d(-hi) * (1.0lf - lo) / (1.7724538509055160273lf * t);
  }
  return x < 0.0lf ? 2.0lf - r : r;
}

// erfinv: M. Giles' single-precision approximation, then two Newton steps (on erfc beyond
// |y| = 1/2, where 1 - |y| is exact), as the CPU computes it.
double erfinv_d(double y) {
  if (!(abs(y) <= 1.0lf)) return D_NAN;
  if (abs(y) == 1.0lf) return copysign_d(D_INF, y);
  if (y == 0.0lf) return y;
  double w = -log_d((1.0lf - y) * (1.0lf + y)), p;
  if (w < 5.0lf) {
    w -= 2.5lf;
    p = 2.81022636e-08lf;
    p = 3.43273939e-07lf + p * w;
    p = -3.5233877e-06lf + p * w;
    p = -4.39150654e-06lf + p * w;
    p = 0.00021858087lf + p * w;
    p = -0.00125372503lf + p * w;
    p = -0.00417768164lf + p * w;
    p = 0.246640727lf + p * w;
    p = 1.50140941lf + p * w;
  } else {
    w = sqrt(w) - 3.0lf;
    p = -0.000200214257lf;
    p = 0.000100950558lf + p * w;
    p = 0.00134934322lf + p * w;
    p = -0.00367342844lf + p * w;
    p = 0.00573950773lf + p * w;
    p = -0.0076224613lf + p * w;
    p = 0.00943887047lf + p * w;
    p = 1.00167406lf + p * w;
    p = 2.83297682lf + p * w;
  }
  double a = abs(y), x = p * a, q = 1.0lf - a;
  for (int k = 0; k < 2; k++) {
    double err = a > 0.5lf ? q - erfc_d(x) : erf_d(x) - a;
    x -= err / (1.1283791670955125739lf * exp_d(-x * x));
  }
  return copysign_d(x, y);
}

// lgamma(1 + t) for |t| <= 1/4: its Taylor series -gamma t + sum_k (-1)^k zeta(k)/k t^k, to
// t^27, which keeps lgamma's relative accuracy near its roots 1 and 2.
const double LGAMMA1P_D[27] = double[](
  -0.037037037312989324lf, 0.038461539034675189lf, -0.040000001192140137lf,
  0.041666669150341208lf, -0.043478266053040261lf, 0.045454556293204669lf,
  -0.047619070330142219lf, 0.050000047698101693lf, -0.052631679379616644lf,
  0.055555767627403614lf, -0.058823978658684564lf, 0.062500955141213024lf,
  -0.066668705882420465lf, 0.07143294629536133lf, -0.076932516411352181lf,
  0.08335384054610899lf, -0.090954017145829041lf, 0.10009945751278182lf, -0.1113342658695647lf,
  0.12550966952474304lf, -0.14404989676884608lf, 0.16955717699740805lf, -0.20738555102867423lf,
  0.27058080842778459lf, -0.40068563438653143lf, 0.82246703342411309lf, -0.57721566490153287lf);
double lgamma1p_series_d(double t) {
  double r = LGAMMA1P_D[0];
  for (int k = 1; k < 27; k++) r = r * t + LGAMMA1P_D[k];
  return r * t;
}

// lgamma for x > 0: near 1 and 2 the series above; elsewhere the recurrence up to z >= 20,
// then Stirling's series.
double lgamma_pos_d(double x) {
  if (abs(x - 1.0lf) <= 0.25lf) return lgamma1p_series_d(x - 1.0lf);
  if (abs(x - 2.0lf) <= 0.25lf) return lgamma1p_series_d(x - 2.0lf) + log1p_d(x - 2.0lf);
  double prod = 1.0lf, z = x;
  for (int k = 0; k < 20 && z < 20.0lf; k++) {
    prod *= z;
    z += 1.0lf;
  }
  if (isinf(z)) return z;
  double f = 1.0lf / (z * z);
  double series = (1.0lf / 12.0lf + f * (-1.0lf / 360.0lf + f * (1.0lf / 1260.0lf +
                  f * (-1.0lf / 1680.0lf + f * (1.0lf / 1188.0lf + f * (-691.0lf / 360360.0lf)))))) / z;
  return (z - 0.5lf) * log_d(z) - z + HALF_LOG_2PI_D + series - log_d(prod);
}

double lgamma_d(double x) {
  if (isnan(x)) return x;
  if (isinf(x)) return D_INF;
  if (x > 0.0lf) return lgamma_pos_d(x);
  if (x == floor(x)) return D_INF;
  double s = abs(sin_d(PI_D * (x - round(x))));
  return log_d(PI_D / s) - lgamma_pos_d(1.0lf - x);
}

double digamma_d(double x) {
  if (x == 0.0lf) return copysign_d(D_INF, -x);
  if (isnan(x)) return x;
  double r = 0.0lf;
  if (x < 0.0lf) {
    if (isinf(x) || x == floor(x)) return D_NAN;
    double fr = PI_D * (x - round(x));
    r = -PI_D * cos_d(fr) / sin_d(fr);
    x = 1.0lf - x;
  }
  for (int k = 0; k < 10 && x < 10.0lf; k++) {
    r -= 1.0lf / x;
    x += 1.0lf;
  }
  if (isinf(x)) return x;
  double f = 1.0lf / (x * x);
  double t = f * (-1.0lf / 12.0lf + f * (1.0lf / 120.0lf + f * (-1.0lf / 252.0lf +
             f * (1.0lf / 240.0lf + f * (-1.0lf / 132.0lf + f * (691.0lf / 32760.0lf +
             f * (-1.0lf / 12.0lf)))))));
  return r + log_d(x) - 0.5lf / x + t;
}
