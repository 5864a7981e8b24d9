// Host side of the MoE GEMM and combine tests, header-only and free of project libraries so
// that both the GoogleTest binary and the standalone nvcc driver (benchmarks/moe/gemm_dev.cu)
// use it: routing of a test case, the alignment the GPU align kernel produces (pairs sorted by
// expert, stable, each run padded to block_m with the value T * k), and double references of
// gemm1 (silu(gate) * up), gemm2 (times the routing weight) and the combine.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "templates/moe/args.h"
#include "templates/moe/gemm_args.h"

namespace ktune::test {

/// 16-bit rounding (to nearest even), as the kernels' cvt.rn.
inline std::uint16_t moe_to_bits(bool bf16, double v) {
  const float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (bf16) return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  // fp16, normal range only (test values stay within it)
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = u & 0x7fffffu;
  if (exp <= 0) {  // subnormal
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

inline double moe_from_bits(bool bf16, std::uint16_t b) {
  if (bf16) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int exp = (b >> 10) & 0x1f;
  const int mant = b & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(1024 + mant, exp - 25);
  return (b & 0x8000) ? -v : v;
}

/// Random values in [lo, hi) rounded to the dtype, never 0, as bits and as doubles.
struct MoeTensor {
  std::vector<std::uint16_t> bits;
  std::vector<double> val;
  MoeTensor(bool bf16, std::size_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0)
      : bits(n), val(n) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t b = moe_to_bits(bf16, u(rng));
      if (moe_from_bits(bf16, b) == 0.0) b = moe_to_bits(bf16, 0.125);
      bits[i] = b;
      val[i] = moe_from_bits(bf16, b);
    }
  }
};

/// A routed batch: T tokens, k distinct experts each. Expert 0 receives every token; with
/// E >= 3 expert E - 1 receives none; the other slots are random; odd tokens list expert 0
/// last, so both slot orders occur.
struct MoeTestRouting {
  int tokens = 0, experts = 0, k = 0;
  std::vector<int> ids;         // [T * k]
  std::vector<float> weights;   // [T * k], in (0.1, 1)
};

inline MoeTestRouting moe_test_routing(int tokens, int experts, int k, std::mt19937& rng,
                                   bool skewed = true) {
  MoeTestRouting r{tokens, experts, k, {}, {}};
  std::uniform_real_distribution<float> wd(0.1f, 1.0f);
  const int pool = skewed && experts >= 3 ? experts - 1 : experts;  // experts that can be drawn
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> chosen;
    if (skewed) chosen.push_back(0);
    while (static_cast<int>(chosen.size()) < k) {
      const int e = static_cast<int>(rng() % static_cast<unsigned>(pool));
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    if (skewed && t % 2 == 1) std::rotate(chosen.begin(), chosen.begin() + 1, chosen.end());
    for (int s = 0; s < k; ++s) {
      r.ids.push_back(chosen[s]);
      r.weights.push_back(wd(rng));
    }
  }
  return r;
}

/// What the align kernel writes, sized by the upper bounds.
struct MoeAlignment {
  std::vector<int> sorted_pairs;  // [moe_max_padded], pairs sorted by expert; padding T * k
  std::vector<int> block_expert;  // [moe_max_blocks], -1 past the end
  int padded_rows = 0;
  int max_blocks = 0;
};

inline MoeAlignment moe_align_host(const MoeTestRouting& r, int block_m) {
  const int pairs = r.tokens * r.k;
  MoeAlignment a;
  a.max_blocks = static_cast<int>(moe_max_blocks(pairs, r.experts, block_m));
  a.sorted_pairs.assign(static_cast<std::size_t>(a.max_blocks) * block_m, pairs);
  a.block_expert.assign(a.max_blocks, -1);
  int row = 0;
  for (int e = 0; e < r.experts; ++e) {
    const int start = row;
    for (int p = 0; p < pairs; ++p)
      if (r.ids[p] == e) a.sorted_pairs[row++] = p;
    row = start + (row - start + block_m - 1) / block_m * block_m;
    for (int b = start / block_m; b < row / block_m; ++b) a.block_expert[b] = e;
  }
  a.padded_rows = row;
  return a;
}

/// Error bound check: |got - ref| <= tol, NaN never passes. Records the first few failures.
struct MoeChecker {
  explicit MoeChecker(std::string w) : what(std::move(w)) {}
  std::string what;
  long long checked = 0, failed = 0;
  double worst = 0.0;  // largest |err| / tol
  std::string first;
  void operator()(double got, double ref, double tol, const std::string& where) {
    ++checked;
    const double err = std::fabs(got - ref);
    const bool ok = err <= tol;  // false for NaN
    if (ok) {
      worst = std::max(worst, err / tol);
    } else {
      if (failed++ == 0)
        first = what + " " + where + ": got " + std::to_string(got) + " want " +
                std::to_string(ref) + " tol " + std::to_string(tol);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err / tol);
    }
  }
};

/// Unit roundoff of the 16-bit type.
inline double moe_unit(bool bf16) { return bf16 ? 1.0 / 256 : 1.0 / 2048; }

/// act[row, j] = silu(x[p / k] . w1[e, j]) * (x[p / k] . w1[e, I + j]) for each real row
/// (NAN for padding rows); mag[row, j]: sum of |terms| of both products (for the bound).
inline void moe_gemm1_ref(const MoeTestRouting& r, const MoeAlignment& a, const std::vector<double>& x,
                          const std::vector<double>& w1, int hidden, int inter,
                          std::vector<double>& act, std::vector<double>& mag) {
  const std::size_t rows = a.sorted_pairs.size();
  act.assign(rows * inter, NAN);
  mag.assign(rows * inter, 0.0);
  const int pairs = r.tokens * r.k;
  const int block_m = static_cast<int>(rows) / a.max_blocks;
  for (int row = 0; row < a.padded_rows; ++row) {
    const int p = a.sorted_pairs[row];
    if (p >= pairs) continue;
    const int e = a.block_expert[row / block_m];
    const double* xr = &x[static_cast<std::size_t>(p / r.k) * hidden];
    for (int j = 0; j < inter; ++j) {
      const double* wg = &w1[(static_cast<std::size_t>(e) * 2 * inter + j) * hidden];
      const double* wu = &w1[(static_cast<std::size_t>(e) * 2 * inter + inter + j) * hidden];
      double g = 0, u = 0, m = 0;
      for (int h = 0; h < hidden; ++h) {
        g += xr[h] * wg[h];
        u += xr[h] * wu[h];
        m += std::fabs(xr[h] * wg[h]) + std::fabs(xr[h] * wu[h]);
      }
      act[static_cast<std::size_t>(row) * inter + j] = g / (1.0 + std::exp(-g)) * u;
      mag[static_cast<std::size_t>(row) * inter + j] = m * (1.0 + std::fabs(u) + std::fabs(g));
    }
  }
}

/// out[p, c] = weight[p] * act[row(p)] . w2[e, c]; mag: weight * sum of |terms|.
inline void moe_gemm2_ref(const MoeTestRouting& r, const MoeAlignment& a,
                          const std::vector<double>& act, const std::vector<double>& w2,
                          int hidden, int inter, std::vector<double>& out,
                          std::vector<double>& mag) {
  const int pairs = r.tokens * r.k;
  const int block_m = static_cast<int>(a.sorted_pairs.size()) / a.max_blocks;
  out.assign(static_cast<std::size_t>(pairs) * hidden, NAN);
  mag.assign(static_cast<std::size_t>(pairs) * hidden, 0.0);
  for (int row = 0; row < a.padded_rows; ++row) {
    const int p = a.sorted_pairs[row];
    if (p >= pairs) continue;
    const int e = a.block_expert[row / block_m];
    const double* ar = &act[static_cast<std::size_t>(row) * inter];
    for (int c = 0; c < hidden; ++c) {
      const double* wr = &w2[(static_cast<std::size_t>(e) * hidden + c) * inter];
      double s = 0, m = 0;
      for (int j = 0; j < inter; ++j) {
        s += ar[j] * wr[j];
        m += std::fabs(ar[j] * wr[j]);
      }
      out[static_cast<std::size_t>(p) * hidden + c] = r.weights[p] * s;
      mag[static_cast<std::size_t>(p) * hidden + c] = r.weights[p] * m;
    }
  }
}

/// One point of the GEMM's tunable space.
struct MoeGemmTile {
  int block_m, block_n, block_k, warps, warps_m, stages;
  const char* invalid_reason(bool gated) const {
    return moe_gemm_invalid_reason(block_m, block_n, block_k, warps, warps_m, stages, gated);
  }
  unsigned smem_bytes(bool gated) const {
    return moe_gemm_smem_bytes(block_m, block_n, block_k, stages, gated);
  }
  std::string key() const {
    return "block_m=" + std::to_string(block_m) + ",block_n=" + std::to_string(block_n) +
           ",block_k=" + std::to_string(block_k) + ",warps=" + std::to_string(warps) +
           ",warps_m=" + std::to_string(warps_m) + ",stages=" + std::to_string(stages);
  }
};

/// NVRTC name expressions (until the Op description owns them).
inline std::string moe_gemm_name(bool bf16, const MoeGemmTile& c, bool gated) {
  return std::string("ktune::moe_gemm_kernel<ktune::") + (bf16 ? "bf16" : "fp16") + ", " +
         std::to_string(c.block_m) + ", " + std::to_string(c.block_n) + ", " +
         std::to_string(c.block_k) + ", " + std::to_string(c.warps) + ", " +
         std::to_string(c.warps_m) + ", " + std::to_string(c.stages) + ", " +
         (gated ? "true" : "false") + ">";
}

inline std::string moe_combine_name(bool bf16, int threads, int vec) {
  return std::string("ktune::moe_combine_kernel<ktune::") + (bf16 ? "bf16" : "fp16") + ", " +
         std::to_string(threads) + ", " + std::to_string(vec) + ">";
}

}  // namespace ktune::test
