#include "tests/support/fused_reference.hpp"

#include <cmath>
#include <limits>
#include <cstring>

#include "templates/common/check_args.h"

namespace ktune::test {

NormResult add_rmsnorm_ref(const Matrix& x, const Matrix& r, const Vector& w, double eps) {
  NormResult out;
  out.h = x + r;
  out.y.resize(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double inv = 1.0 / std::sqrt(out.h.row(i).squaredNorm() / static_cast<double>(x.cols()) + eps);
    out.y.row(i) = (out.h.row(i).array() * inv * w.transpose().array()).matrix();
  }
  return out;
}

Matrix layernorm_ref(const Matrix& x, const Vector& w, const Vector& b, double eps) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double mean = x.row(i).mean();
    const Eigen::RowVectorXd d = x.row(i).array() - mean;
    const double var = d.squaredNorm() / static_cast<double>(x.cols());
    y.row(i) = (d.array() / std::sqrt(var + eps) * w.transpose().array() + b.transpose().array())
                   .matrix();
  }
  return y;
}

NormResult layernorm_ref(const Matrix& x, const Matrix& r, const Vector& w, const Vector& b,
                         double eps) {
  NormResult out;
  out.h = x + r;
  out.y = layernorm_ref(out.h, w, b, eps);
  return out;
}

double activation_ref(double x, Activation act) {
  switch (act) {
    case Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Activation::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::silu: return x / (1.0 + std::exp(-x));
    case Activation::relu: return x > 0.0 ? x : 0.0;
  }
  return x;
}

Matrix bias_act_ref(const Matrix& x, const Vector& b, Activation act) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) y(i, j) = activation_ref(x(i, j) + b(j), act);
  return y;
}

Matrix swiglu_ref(const Matrix& x) {
  const Eigen::Index n = x.cols() / 2;
  Matrix y(x.rows(), n);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < n; ++j)
      y(i, j) = activation_ref(x(i, j), Activation::silu) * x(i, n + j);
  return y;
}

Matrix softmax_ref(const Matrix& x, double scale) {
  Matrix y(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const Eigen::RowVectorXd s = x.row(i) * scale;
    const Eigen::RowVectorXd e = (s.array() - s.maxCoeff()).exp();
    y.row(i) = e / e.sum();
  }
  return y;
}

namespace {
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) { return float_of(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: Inf
  if (abs < 0x38800000u) {
    // Below 2^-14: a multiple of 2^-24; the scaling is exact and nearbyint rounds to even.
    const float scaled = float_of(abs) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  const std::uint32_t exp = (abs >> 23) - 127u + 15u;
  const std::uint32_t mant = abs & 0x7fffffu;
  std::uint32_t h = (exp << 10) | (mant >> 13);
  const std::uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<std::uint16_t>(sign | h);
}

float fp16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

float e4m3_bits_to_float(std::uint8_t bits) {
  const int e = (bits >> 3) & 15, m = bits & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = e == 0 ? static_cast<float>(m) * 0.001953125f  // m * 2^-9
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (bits & 0x80) ? -mag : mag;
}

std::uint8_t float_to_e4m3_bits(float f) {
  // The nearest finite value (ties to the even code; past 448 saturates to 448), sign apart.
  // Normal codes hold 1.m x 2^(E - 7) with 3 mantissa bits, subnormals m x 2^-9: the magnitude
  // in units of its binade's quantum, rounded to the nearest even integer, is the code's low
  // bits (a round-up to 16 moves to the next binade, mantissa 0). NaN maps to the NaN code.
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<std::uint8_t>(sign | 0x7f);
  if (a >= 448.0f) return static_cast<std::uint8_t>(sign | 0x7e);  // the largest finite value
  if (a < 0.015625f) {  // below 2^-6: subnormal quanta of 2^-9 (8 of them reach 2^-6, code 8)
    const int r = static_cast<int>(std::nearbyint(a * 512.0f));
    return static_cast<std::uint8_t>(sign | r);
  }
  int e = 0;
  std::frexp(a, &e);  // a = f x 2^e, f in [0.5, 1): a = 1.m x 2^(e - 1)
  int r = static_cast<int>(std::nearbyint(std::ldexp(a, 4 - e)));  // in [8, 16]
  if (r == 16) r = 8, ++e;
  return static_cast<std::uint8_t>(sign | ((e - 1 + 7) << 3) | (r - 8));
}

double round_to(DType t, double v) {
  const float f = static_cast<float>(v);
  switch (t) {
    case DType::f32:
    case DType::i32: return f;  // not a float type: no rounding to model
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(f));
    case DType::f16: return fp16_bits_to_float(float_to_fp16_bits(f));
    case DType::e4m3: return e4m3_bits_to_float(float_to_e4m3_bits(f));
  }
  return f;
}

std::vector<double> fill_values(DType t, unsigned long long seed, std::size_t count, float lo,
                                float hi) {
  const double nonzero = round_to(t, hi != 0.0f ? 0.5f * hi : 0.5f * lo);
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double v = round_to(t, fill_value(seed, i, lo, hi));
    out[i] = v == 0.0 ? nonzero : v;
  }
  return out;
}

}  // namespace ktune::test
