// CPU references of the fused ops in double precision (Eigen), and 16-bit float conversions that
// round exactly as the GPU does, for tests that check kernels against known answers.
#pragma once

#include <Eigen/Dense>

#include <cstdint>
#include <vector>

#include "runtime/core/types.hpp"
#include "templates/fused/args.h"

namespace ktune::test {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXd;

/// y and h of a residual norm.
struct NormResult {
  Matrix y;
  Matrix h;
};

/// h = x + r; y = h / sqrt(mean(h^2) + eps) * w (per row).
NormResult add_rmsnorm_ref(const Matrix& x, const Matrix& r, const Vector& w, double eps);
/// y = (x - mean) / sqrt(var + eps) * w + b (per row, biased variance).
Matrix layernorm_ref(const Matrix& x, const Vector& w, const Vector& b, double eps);
/// layernorm of h = x + r; returns y and h.
NormResult layernorm_ref(const Matrix& x, const Matrix& r, const Vector& w, const Vector& b,
                         double eps);
/// One activation at one point.
double activation_ref(double x, Activation act);
/// y = act(x + b) (b broadcast over rows).
Matrix bias_act_ref(const Matrix& x, const Vector& b, Activation act);
/// x is [m, 2n]: y = silu(x[:, :n]) * x[:, n:].
Matrix swiglu_ref(const Matrix& x);
/// Row softmax of scale * x.
Matrix softmax_ref(const Matrix& x, double scale);

/// float -> bf16 bits, round to nearest even (NaN stays NaN).
std::uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(std::uint16_t bits);
/// float -> IEEE fp16 bits, round to nearest even, with subnormals and overflow to Inf.
std::uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(std::uint16_t bits);
/// OCP FP8 E4M3: round to nearest even, saturating to +-448 (as cvt.rn.satfinite); and back.
std::uint8_t float_to_e4m3_bits(float f);
float e4m3_bits_to_float(std::uint8_t bits);
/// `v` rounded through `t` (fp32, fp16 or bf16) and back.
double round_to(DType t, double v);

/// What fill_random_kernel<T> writes for (seed, lo, hi), as doubles: count values rounded to t.
std::vector<double> fill_values(DType t, unsigned long long seed, std::size_t count, float lo,
                                float hi);

}  // namespace ktune::test
