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
