// The CPU references of the fused ops against hand-computed cases and known properties, and the
// 16-bit conversions against exact bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/support/fused_reference.hpp"

namespace ktune::test {
namespace {

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = u(gen);
  return m;
}

TEST(FusedReference, AddRmsNormByHand) {
  Matrix x(2, 2), r(2, 2);
  x << 1, 2, 3, -1;
  r << 0, 1, 1, 1;
  Vector w(2);
  w << 1, 2;
  const NormResult out = add_rmsnorm_ref(x, r, w, 0.0);
  // h = [[1, 3], [4, 0]]; mean(h^2) = 5 and 8.
  EXPECT_DOUBLE_EQ(out.h(0, 1), 3.0);
  EXPECT_NEAR(out.y(0, 0), 1 / std::sqrt(5.0), 1e-15);
  EXPECT_NEAR(out.y(0, 1), 6 / std::sqrt(5.0), 1e-15);
  EXPECT_NEAR(out.y(1, 0), 4 / std::sqrt(8.0), 1e-15);
  EXPECT_DOUBLE_EQ(out.y(1, 1), 0.0);
}

TEST(FusedReference, RmsNormHasUnitRmsWithUnitWeight) {
  const Matrix x = random_matrix(4, 4095, 1, 3.0);
  const NormResult out = add_rmsnorm_ref(x, Matrix::Zero(4, 4095), Vector::Ones(4095), 1e-12);
  for (Eigen::Index i = 0; i < 4; ++i)
    EXPECT_NEAR(std::sqrt(out.y.row(i).squaredNorm() / 4095), 1.0, 1e-9);
}

TEST(FusedReference, LayerNormByHand) {
  Matrix x(1, 4);
  x << 1, 2, 3, 4;
  const Matrix y = layernorm_ref(x, Vector::Ones(4), Vector::Zero(4), 0.0);
  // mean 2.5, variance 1.25
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y(0, j), (j + 1 - 2.5) / std::sqrt(1.25), 1e-15);
}

TEST(FusedReference, LayerNormHasMeanZeroVarianceOne) {
  // A large offset checks that the variance does not cancel.
  const Matrix x = (random_matrix(3, 1000, 2).array() + 1000.0).matrix();
  const Matrix y = layernorm_ref(x, Vector::Ones(1000), Vector::Zero(1000), 0.0);
  for (Eigen::Index i = 0; i < 3; ++i) {
    EXPECT_NEAR(y.row(i).mean(), 0.0, 1e-9);
    EXPECT_NEAR((y.row(i).array() - y.row(i).mean()).square().mean(), 1.0, 1e-9);
  }
  Vector w = Vector::Constant(1000, 2.0), b = Vector::Constant(1000, 1.0);
  const Matrix z = layernorm_ref(x, w, b, 0.0);
  EXPECT_NEAR(z.row(0).mean(), 1.0, 1e-9);
  EXPECT_NEAR((z.row(0).array() - 1.0).square().mean(), 4.0, 1e-9);
}

TEST(FusedReference, LayerNormWithResidualNormalisesTheSum) {
  const Matrix x = random_matrix(2, 64, 3), r = random_matrix(2, 64, 4);
  const Vector w = Vector::Ones(64), b = Vector::Zero(64);
  const NormResult out = layernorm_ref(x, r, w, b, 1e-5);
  EXPECT_TRUE(out.h.isApprox(x + r));
  EXPECT_TRUE(out.y.isApprox(layernorm_ref(x + r, w, b, 1e-5)));
}

TEST(FusedReference, SoftmaxByHand) {
  Matrix x(2, 3);
  x << 0, std::log(2.0), std::log(3.0), 1000, 1001, 999;
  const Matrix y = softmax_ref(x, 1.0);
  EXPECT_NEAR(y(0, 0), 1.0 / 6, 1e-15);
  EXPECT_NEAR(y(0, 1), 2.0 / 6, 1e-15);
  EXPECT_NEAR(y(0, 2), 3.0 / 6, 1e-15);
  // Large inputs do not overflow: max-subtracted.
  const double e = std::exp(1.0);
  EXPECT_NEAR(y(1, 1), e / (1 + e + 1 / e), 1e-15);
  Matrix z(1, 2);
  z << 1, 2;
  const Matrix flat = softmax_ref(z, 0.0);
  EXPECT_DOUBLE_EQ(flat(0, 0), 0.5);
}

TEST(FusedReference, SoftmaxRowsSumToOneAndIgnoreShifts) {
  const Matrix x = random_matrix(5, 4095, 5, 8.0);
  const Matrix y = softmax_ref(x, 0.7);
  for (Eigen::Index i = 0; i < 5; ++i) EXPECT_NEAR(y.row(i).sum(), 1.0, 1e-12);
  EXPECT_TRUE(softmax_ref((x.array() + 3.0).matrix(), 0.7).isApprox(y, 1e-12));
  EXPECT_GE(y.minCoeff(), 0.0);
}

TEST(FusedReference, ActivationsAtKnownPoints) {
  EXPECT_DOUBLE_EQ(activation_ref(0.0, Activation::gelu_tanh), 0.0);
  EXPECT_NEAR(activation_ref(1.0, Activation::gelu_erf), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(activation_ref(1.0, Activation::gelu_tanh), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(activation_ref(-1.0, Activation::gelu_erf), -0.15865525393145707, 1e-15);
  EXPECT_NEAR(activation_ref(1.0, Activation::silu), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(activation_ref(-20.0, Activation::gelu_erf), 0.0, 1e-80);
  EXPECT_NEAR(activation_ref(20.0, Activation::gelu_tanh), 20.0, 1e-12);
  EXPECT_DOUBLE_EQ(activation_ref(-2.0, Activation::relu), 0.0);
  EXPECT_DOUBLE_EQ(activation_ref(3.0, Activation::relu), 3.0);
}

TEST(FusedReference, BiasActAndSwigluByHand) {
  Matrix x(1, 2);
  x << 0.5, -1.0;
  Vector b(2);
  b << 0.5, 3.0;
  const Matrix y = bias_act_ref(x, b, Activation::relu);
  EXPECT_DOUBLE_EQ(y(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(y(0, 1), 2.0);
  Matrix g(1, 4);
  g << 1, 2, 3, 4;
  const Matrix s = swiglu_ref(g);
  ASSERT_EQ(s.cols(), 2);
  EXPECT_NEAR(s(0, 0), 3 * activation_ref(1, Activation::silu), 1e-15);
  EXPECT_NEAR(s(0, 1), 4 * activation_ref(2, Activation::silu), 1e-15);
}

// float_to_e4m3_bits against the definition: the nearest of the 127 finite non-negative codes
// (ties to the even code), on every code, every midpoint between neighbours (the ties), values
// just off them, and random magnitudes over the whole range.
TEST(HalfConversions, E4m3IsTheNearestFiniteValue) {
  const auto nearest = [](float f) {
    const float a = std::fabs(f);
    int best = 0;
    float best_err = INFINITY;
    for (int code = 0; code <= 0x7e; ++code) {
      const float err = std::fabs(e4m3_bits_to_float(static_cast<std::uint8_t>(code)) - a);
      if (err < best_err || (err == best_err && code % 2 == 0 && best % 2 == 1)) {
        best = code;
        best_err = err;
      }
    }
    return static_cast<std::uint8_t>((std::signbit(f) ? 0x80 : 0) | best);
  };
  std::vector<float> probes;
  for (int code = 0; code <= 0x7e; ++code) {
    const float v = e4m3_bits_to_float(static_cast<std::uint8_t>(code));
    const float next = code < 0x7e ? e4m3_bits_to_float(static_cast<std::uint8_t>(code + 1))
                                   : 480.0f;
    const float mid = 0.5f * (v + next);
    for (float p : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(exponent(rng)) * (i % 2 ? -1 : 1));
  for (float p : {1e6f, 448.0f, 464.0f, 479.0f, 0.0f, -0.0f, 1e-30f}) probes.push_back(p);
  int bad = 0;
  for (float p : probes)
    if (float_to_e4m3_bits(p) != nearest(p) && bad++ < 5)
      ADD_FAILURE() << p << ": " << int(float_to_e4m3_bits(p)) << ", want " << int(nearest(p));
  EXPECT_EQ(bad, 0) << "of " << probes.size();
}

TEST(HalfConversions, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80);      // tie: to even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82);      // tie: to even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256 + 1e-6f), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(float_to_bf16_bits(INFINITY), 0x7f80);
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = bf16_bits_to_float(bits);
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bf16_bits(f), bits);
    }
  }
}

TEST(HalfConversions, Fp16RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00);                 // tie rounds up to Inf
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);    // tie: to even (zero)
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002);    // tie: to even
  EXPECT_EQ(float_to_fp16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up to min normal
  EXPECT_EQ(fp16_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(float_to_fp16_bits(std::nanf("")))));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = fp16_bits_to_float(bits);
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_fp16_bits(f), bits) << std::hex << b;
    }
  }
  EXPECT_DOUBLE_EQ(round_to(DType::f16, 0.1), 0.0999755859375);
  EXPECT_DOUBLE_EQ(round_to(DType::bf16, 0.1), 0.10009765625);
}

TEST(FillValues, DeterministicInRangeNeverZero) {
  const std::vector<double> a = fill_values(DType::bf16, 7, 100000, -1.0f, 1.0f);
  EXPECT_EQ(a, fill_values(DType::bf16, 7, 100000, -1.0f, 1.0f));
  EXPECT_NE(a, fill_values(DType::bf16, 8, 100000, -1.0f, 1.0f));
  double sum = 0;
  for (double v : a) {
    EXPECT_NE(v, 0.0);
    EXPECT_GE(v, -1.0);
    EXPECT_LE(v, 1.0);  // rounding to bf16 may reach hi
    sum += v;
  }
  EXPECT_NEAR(sum / static_cast<double>(a.size()), 0.0, 0.02);
}

}  // namespace
}  // namespace ktune::test
