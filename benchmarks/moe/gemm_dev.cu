// Development harness for templates/moe/gemm.cuh and combine.cuh.
//
//   check: every check configuration (both dtypes) on the v0 case table (E in {1, 8}, T in
//          {1, 3, 17, 100}, k in {1, 2}, H=136/I=200 and one aligned 256/512 shape), then every
//          timing kernel (bf16) on a few cases, against the double references of
//          tests/support/moe_gemm_reference.hpp (host routing and alignment, expert 0 with every
//          token and expert E - 1 with none, outputs poisoned with NaN, padding rows unwritten).
//   time:  gemm1 and gemm2 of every timing kernel whose block_m suits the token count, on the
//          Mixtral (E=8, k=2, H=4096, I=14336) and DeepSeek-like (E=64, k=8, H=2048, I=1408)
//          layers at several T with uniform random routing; weights rotate between two copies so
//          that no repetition finds the previous one's weights in L2. Prints the best gemm1, the
//          best gemm2 and the pair launched back to back, with the weight bytes the routing
//          touches over the time as a share of the copy bandwidth.
//          tmin=T: only the points with at least T tokens.
//   peak:  the rate of dense mma.sync from registers with the SM clock (the GEMMs' ceiling).
//   prof layer=mixtral|deepseek t=T g1=NAME g2=NAME: one launch of each (for ncu).
//   only=N (with check): check_kernels() pair N alone, for compute-sanitizer.
//   part=i/n (with check): cases i, i + n, ... alone (parallel processes).
//
// Build (nvcc 13, here or on the GPU machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/gemm_dev.cu -o gemm_dev
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "moe/combine.cuh"
#include "moe/gemm.cuh"
#include "benchmarks/moe/dev_util.cuh"
#include "tests/support/moe_gemm_reference.hpp"

using namespace ktune;
using namespace ktune::test;

using Launch = void (*)(dim3, unsigned, unsigned, const MoeGemmArgs&);

/// One kernel instantiation: the tile, gemm1 (gated) or gemm2, launchers per dtype.
struct Kern {
  int bm, bn, bk, warps, wm, stages, group, pf;
  bool gated;
  Launch bf16_launch, fp16_launch;  // fp16_launch may be null (timing kernels)
  int minc = 1;  // MIN_CTAS
  int epi = 0;   // EPI
  std::string params() const {
    char b[96];
    std::snprintf(b, sizeof b, "%d,%d,%d,%d,%d,%d", bm, bn, bk, warps, wm, stages);
    std::string s = b;
    if (group) s += ",g" + std::to_string(group);
    if (pf) s += ",p" + std::to_string(pf);
    if (minc > 1) s += ",m" + std::to_string(minc);
    if (epi) s += ",e" + std::to_string(epi);
    return s;
  }
  std::string name() const { return params(); }
  unsigned smem() const { return moe_gemm_smem_bytes(bm, bn, bk, stages, gated); }
  void launch(bool bf16, const MoeGemmArgs& a) const {
    const dim3 grid(a.max_blocks, moe_gemm_grid_y(a.n, bn));
    (bf16 ? bf16_launch : fp16_launch)(grid, warps * 32, smem(), a);
  }
};

template <typename T, int BM, int BN, int BK, int W, int WM, int S, bool G, int GR, int L2,
          int MC = 1, int EP = 0>
void launch_gemm(dim3 grid, unsigned threads, unsigned smem, const MoeGemmArgs& a) {
  auto k = moe_gemm_kernel<T, BM, BN, BK, W, WM, S, G, GR, L2, MC, EP>;
  static bool once = [&] {
    // The dynamic limit plus the kernel's static shared memory must stay within 227 KiB.
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(moe_gemm_smem_bytes(BM, BN, BK, S, G))));
    return true;
  }();
  (void)once;
  k<<<grid, threads, smem>>>(a);
}

static_assert(moe_gemm_invalid_reason(128, 256, 64, 8, 2, 3, false, 8, 256) == nullptr, "");
static_assert(moe_gemm_invalid_reason(128, 128, 64, 8, 2, 3, false, 8, 0, 2) == nullptr, "");
static_assert(moe_gemm_invalid_reason(128, 256, 64, 8, 2, 3, false, 8, 0, 1, 1) == nullptr, "");
static_assert(moe_gemm_invalid_reason(128, 256, 32, 8, 2, 2, false, 0, 0, 1, 1) != nullptr, "");

// Both GEMMs of one tile, both dtypes (check table) or bf16 alone (timing table).
#define BOTH(BM, BN, BK, W, WM, S, GR, L2)                                                  \
  Kern{BM, BN, BK, W, WM, S, GR, L2, true, launch_gemm<bf16, BM, BN, BK, W, WM, S, true, GR, L2>, \
       launch_gemm<fp16, BM, BN, BK, W, WM, S, true, GR, L2>},                               \
      Kern {                                                                                \
    BM, BN, BK, W, WM, S, GR, L2, false, launch_gemm<bf16, BM, BN, BK, W, WM, S, false, GR, L2>, \
        launch_gemm<fp16, BM, BN, BK, W, WM, S, false, GR, L2>                              \
  }
#define G1(BM, BN, BK, W, WM, S, GR, L2) \
  Kern { BM, BN, BK, W, WM, S, GR, L2, true, launch_gemm<bf16, BM, BN, BK, W, WM, S, true, GR, L2>, nullptr }
#define G2(BM, BN, BK, W, WM, S, GR, L2) \
  Kern { BM, BN, BK, W, WM, S, GR, L2, false, launch_gemm<bf16, BM, BN, BK, W, WM, S, false, GR, L2>, nullptr }
#define G1M(BM, BN, BK, W, WM, S, GR, L2, MC)                                                 \
  Kern {                                                                                    \
    BM, BN, BK, W, WM, S, GR, L2, true, launch_gemm<bf16, BM, BN, BK, W, WM, S, true, GR, L2, MC>, \
        nullptr, MC                                                                         \
  }
#define G2M(BM, BN, BK, W, WM, S, GR, L2, MC)                                                  \
  Kern {                                                                                     \
    BM, BN, BK, W, WM, S, GR, L2, false, launch_gemm<bf16, BM, BN, BK, W, WM, S, false, GR, L2, MC>, \
        nullptr, MC                                                                          \
  }
// EPI=1 (epilogue through shared memory): both GEMMs in both dtypes, or gemm1 / gemm2 in bf16.
#define LG(T, G, BM, BN, BK, W, WM, S, GR, L2) \
  launch_gemm<T, BM, BN, BK, W, WM, S, G, GR, L2, 1, 1>
#define BOTHE(BM, BN, BK, W, WM, S, GR, L2)                                                  \
  Kern{BM, BN, BK, W, WM, S, GR, L2, true, LG(bf16, true, BM, BN, BK, W, WM, S, GR, L2),     \
       LG(fp16, true, BM, BN, BK, W, WM, S, GR, L2), 1, 1},                                  \
      Kern {                                                                                \
    BM, BN, BK, W, WM, S, GR, L2, false, LG(bf16, false, BM, BN, BK, W, WM, S, GR, L2),     \
        LG(fp16, false, BM, BN, BK, W, WM, S, GR, L2), 1, 1                                 \
  }
#define G1E(BM, BN, BK, W, WM, S, GR, L2)                                                    \
  Kern {                                                                                    \
    BM, BN, BK, W, WM, S, GR, L2, true, LG(bf16, true, BM, BN, BK, W, WM, S, GR, L2), nullptr, \
        1, 1                                                                                \
  }
#define G2E(BM, BN, BK, W, WM, S, GR, L2)                                                    \
  Kern {                                                                                    \
    BM, BN, BK, W, WM, S, GR, L2, false, LG(bf16, false, BM, BN, BK, W, WM, S, GR, L2),     \
        nullptr, 1, 1                                                                       \
  }

/// Checked in both dtypes on the full case table: v0's seven tiles and the new parameters.
std::vector<Kern> check_kernels() {
  return {
      BOTH(64, 64, 64, 4, 2, 3, 0, 0),    BOTH(16, 64, 64, 4, 1, 4, 0, 0),
      BOTH(128, 128, 32, 8, 2, 3, 0, 0),  BOTH(32, 32, 128, 2, 1, 2, 0, 0),
      BOTH(128, 64, 64, 4, 4, 4, 0, 0),   BOTH(16, 128, 64, 8, 1, 5, 0, 0),
      BOTH(64, 128, 64, 8, 2, 3, 0, 0),   BOTH(64, 64, 64, 4, 2, 3, 2, 256),
      BOTH(128, 64, 32, 4, 2, 4, 4, 128), BOTH(32, 64, 128, 4, 2, 3, 8, 0),
      BOTH(16, 32, 128, 2, 1, 4, 0, 0),   BOTH(128, 64, 64, 4, 2, 3, 8, 0),
      BOTH(64, 64, 32, 8, 2, 3, 4, 0),    BOTHE(128, 128, 32, 8, 2, 3, 0, 0),
      BOTHE(64, 64, 64, 4, 2, 3, 8, 0),   BOTHE(16, 32, 128, 2, 1, 4, 0, 0),
      BOTHE(16, 16, 128, 1, 1, 4, 0, 0),
  };
}

/// Timed (bf16), and checked in bf16 on a few cases.
std::vector<Kern> timing_kernels() {
  return {
      // block_m 16: weight streaming at small T
      G1(16, 32, 128, 2, 1, 4, 0, 0), G1(16, 32, 128, 2, 1, 6, 0, 0),
      G1(16, 64, 64, 4, 1, 4, 0, 0), G1(16, 64, 64, 4, 1, 6, 0, 0),
      G1(16, 64, 64, 4, 1, 6, 0, 256), G1(16, 64, 64, 4, 1, 6, 0, 128),
      G1(16, 64, 128, 4, 1, 3, 0, 0), G1(16, 64, 128, 4, 1, 4, 0, 0),
      G1(16, 128, 64, 8, 1, 3, 0, 0), G1(16, 128, 64, 8, 1, 6, 0, 0),
      G1(16, 32, 64, 2, 1, 6, 0, 256), G1(16, 128, 128, 8, 1, 3, 0, 0),
      G2(16, 32, 128, 2, 1, 6, 0, 0), G2(16, 64, 128, 4, 1, 4, 0, 0),
      G2(16, 64, 128, 4, 1, 6, 0, 0), G2(16, 64, 64, 4, 1, 6, 0, 0),
      G2(16, 64, 64, 4, 1, 6, 0, 256), G2(16, 128, 64, 8, 1, 6, 0, 0),
      G2(16, 128, 128, 8, 1, 3, 0, 0), G2(16, 64, 64, 4, 1, 4, 0, 0),
      G2(16, 32, 64, 2, 1, 6, 0, 256), G2(16, 16, 128, 1, 1, 6, 0, 0),
      G2(16, 32, 128, 2, 1, 4, 0, 0), G2(16, 32, 64, 2, 1, 4, 0, 256),
      G1(16, 32, 64, 2, 1, 4, 0, 256), G1(16, 16, 64, 1, 1, 6, 0, 256),
      // block_m 32
      G1(32, 64, 64, 4, 2, 4, 0, 0), G1(32, 64, 64, 4, 1, 6, 0, 0),
      G1(32, 32, 128, 2, 1, 4, 0, 0), G1(32, 64, 128, 4, 2, 3, 0, 0),
      G2(32, 64, 128, 4, 1, 4, 0, 0), G2(32, 128, 64, 8, 2, 4, 0, 0),
      G2(32, 32, 128, 2, 1, 6, 0, 0), G2(32, 64, 64, 4, 2, 6, 0, 0),
      G2(32, 32, 128, 2, 1, 4, 0, 0), G1(32, 32, 64, 2, 1, 6, 0, 256),
      // block_m 64
      G1(64, 64, 64, 4, 2, 3, 0, 0), G1(64, 64, 128, 4, 1, 3, 0, 0),
      G1(64, 128, 64, 8, 2, 3, 0, 0), G1(64, 256, 64, 8, 1, 3, 0, 0),
      G1(64, 128, 32, 4, 1, 4, 0, 0), G1(64, 64, 64, 4, 1, 4, 0, 0),
      G2(64, 64, 64, 4, 2, 4, 0, 0), G2(64, 128, 64, 4, 1, 4, 0, 0),
      G2(64, 256, 64, 8, 1, 3, 0, 0), G2(64, 128, 64, 8, 2, 4, 0, 0),
      G2(64, 256, 32, 4, 1, 4, 0, 0), G2(64, 128, 128, 4, 1, 3, 0, 0),
      G1(64, 256, 64, 8, 1, 3, 8, 0), G1(64, 64, 64, 4, 2, 3, 8, 0),
      G2(64, 128, 64, 4, 1, 4, 8, 0), G2M(64, 128, 64, 8, 2, 3, 8, 0, 2),
      G1E(64, 256, 64, 8, 1, 3, 0, 0), G1E(64, 64, 64, 4, 1, 4, 0, 0),
      G2E(64, 128, 64, 4, 1, 4, 8, 0),
      // block_m 128: compute at large T
      G1(128, 128, 64, 8, 2, 3, 0, 0), G1(128, 128, 32, 8, 2, 4, 0, 0),
      G1(128, 128, 64, 8, 2, 4, 0, 0), G1(128, 64, 64, 4, 2, 3, 0, 0),
      G1(128, 64, 32, 4, 2, 4, 0, 0), G1(128, 64, 64, 4, 2, 3, 8, 0),
      G1(128, 128, 64, 8, 2, 3, 8, 0), G1(128, 128, 32, 8, 2, 4, 16, 0),
      G2(128, 256, 64, 8, 2, 3, 0, 0), G2(128, 256, 32, 8, 2, 4, 0, 0),
      G2(128, 128, 64, 8, 2, 3, 0, 0), G2(128, 128, 64, 4, 2, 3, 0, 0),
      G2(128, 128, 32, 4, 2, 4, 0, 0), G2(128, 128, 64, 4, 2, 3, 8, 0),
      G2(128, 256, 64, 8, 2, 3, 8, 0), G2(128, 128, 32, 4, 2, 4, 16, 0),
      G2M(128, 128, 64, 8, 2, 3, 8, 0, 2), G2M(128, 128, 64, 8, 2, 3, 0, 0, 2),
      G2M(128, 128, 32, 8, 2, 4, 8, 0, 2), G1(128, 128, 64, 8, 2, 4, 8, 0),
      G2(128, 256, 64, 8, 2, 4, 8, 0), G1(128, 64, 64, 4, 2, 3, 4, 0),
      G2(128, 128, 64, 4, 2, 3, 4, 0), G2(128, 128, 64, 4, 2, 3, 16, 0),
      G1E(128, 64, 64, 4, 2, 3, 0, 0), G1E(128, 64, 64, 4, 2, 3, 8, 0),
      G1E(128, 128, 64, 8, 2, 3, 8, 0), G1E(128, 128, 64, 8, 2, 4, 8, 0),
      G2E(128, 256, 64, 8, 2, 3, 8, 0), G2E(128, 128, 64, 4, 2, 3, 8, 0),
      G2E(128, 128, 64, 4, 2, 3, 4, 0),
      // block_m 256
      G1(256, 64, 64, 8, 4, 3, 0, 0), G1(256, 64, 64, 8, 4, 3, 8, 0),
      G2(256, 128, 64, 8, 4, 3, 0, 0), G2(256, 128, 64, 8, 4, 3, 8, 0),
  };
}

struct Dev {
  int* sorted = nullptr;
  int* block_expert = nullptr;
  int* padded = nullptr;
  float* weights = nullptr;
  void upload(const MoeAlignment& a, const MoeTestRouting& r) {
    sorted = dev_copy(a.sorted_pairs);
    block_expert = dev_copy(a.block_expert);
    padded = dev_copy(std::vector<int>{a.padded_rows});
    weights = dev_copy(r.weights);
  }
  void free() {
    cudaFree(sorted), cudaFree(block_expert), cudaFree(padded), cudaFree(weights);
  }
};

int only_config = -1;
int part = 0, parts = 1;  // part=i/n: this process checks cases i, i + n, ...
int case_index = 0;

MoeGemmArgs gemm1_args(const void* x, const void* w1, void* act, const Dev& d, int pairs, int k,
                       int H, int I, int max_blocks) {
  return MoeGemmArgs{x,     w1, act, d.sorted, d.block_expert, d.padded, nullptr, pairs,
                     k,     I,  H,   max_blocks, nullptr};
}
MoeGemmArgs gemm2_args(const void* act, const void* w2, void* out, const Dev& d, int pairs,
                       int k, int H, int I, int max_blocks) {
  return MoeGemmArgs{act, w2, out, d.sorted, d.block_expert, d.padded, d.weights, pairs,
                     k,   H,  I,   max_blocks, nullptr};
}

/// Checks gemm1 (g1) and gemm2 (g2) with the same block_m on one case; g1 or g2 may be null
/// (then the other GEMM's partner is the reference-checked kernel alone: gemm2 is always fed
/// with the act that gemm1 wrote, so a null g1 uses `feed` for it).
template <typename T>
void check_case(bool bf16, const Kern& g1, const Kern* g2, int E, int Tn, int k, int H, int I,
                std::mt19937& rng) {
  if (case_index++ % parts != part) return;
  const MoeTestRouting r = moe_test_routing(Tn, E, k, rng);
  const MoeAlignment al = moe_align_host(r, g1.bm);
  const int pairs = Tn * k;
  const MoeTensor x(bf16, static_cast<std::size_t>(Tn) * H, rng);
  const MoeTensor w1(bf16, static_cast<std::size_t>(E) * 2 * I * H, rng, -0.5, 0.5);
  const MoeTensor w2(bf16, static_cast<std::size_t>(E) * H * I, rng, -0.5, 0.5);
  Dev d;
  d.upload(al, r);
  auto* dx = dev_copy(x.bits);
  auto* dw1 = dev_copy(w1.bits);
  auto* dw2 = dev_copy(w2.bits);
  const std::size_t rows = al.sorted_pairs.size();
  void* act = dev_nan(rows * I);
  void* pair_out = dev_nan(static_cast<std::size_t>(pairs) * H);
  void* y = dev_nan(static_cast<std::size_t>(Tn) * H);

  g1.launch(bf16, gemm1_args(dx, dw1, act, d, pairs, k, H, I, al.max_blocks));
  CK(cudaGetLastError());
  if (g2) {
    g2->launch(bf16, gemm2_args(act, dw2, pair_out, d, pairs, k, H, I, al.max_blocks));
    CK(cudaGetLastError());
    MoeCombineArgs c{pair_out, y, Tn, k, H};
    moe_combine_kernel<T, 128, 8><<<dim3(Tn, moe_combine_grid_y(H, 128, 8)), 128>>>(c);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());

  const double u = moe_unit(bf16);
  char tag[240];
  std::snprintf(tag, sizeof tag, "%s %s / %s E=%d T=%d k=%d H=%d I=%d", bf16 ? "bf16" : "fp16",
                g1.name().c_str(), g2 ? g2->name().c_str() : "-", E, Tn, k, H, I);

  // gemm1 against the double reference; padding rows of act must stay NaN (not written).
  std::vector<double> act_ref, mag;
  moe_gemm1_ref(r, al, x.val, w1.val, H, I, act_ref, mag);
  const auto act_bits = host_copy(static_cast<const std::uint16_t*>(act), rows * I);
  MoeChecker c1(std::string("gemm1 ") + tag);
  std::vector<double> act_got(rows * I);
  long long written_padding = 0;
  for (std::size_t i = 0; i < rows * static_cast<std::size_t>(I); ++i) {
    act_got[i] = moe_from_bits(bf16, act_bits[i]);
    const int row = static_cast<int>(i / I);
    if (row >= al.padded_rows || al.sorted_pairs[row] >= pairs) {
      if (act_bits[i] != 0xffff) ++written_padding;
      continue;
    }
    c1(act_got[i], act_ref[i], 2 * u * std::fabs(act_ref[i]) + 1e-5 * mag[i] + 1e-6,
       "row " + std::to_string(row) + " col " + std::to_string(i % I));
  }
  if (written_padding) c1(NAN, 0, 1, "padding rows written: " + std::to_string(written_padding));
  report(c1);

  if (g2) {
    // gemm2 against the double reference fed with the kernel's act.
    std::vector<double> out_ref, mag2;
    moe_gemm2_ref(r, al, act_got, w2.val, H, I, out_ref, mag2);
    const auto out_bits = host_copy(static_cast<const std::uint16_t*>(pair_out),
                                    static_cast<std::size_t>(pairs) * H);
    MoeChecker c2(std::string("gemm2 ") + tag);
    std::vector<double> out_got(out_bits.size());
    for (std::size_t i = 0; i < out_bits.size(); ++i) {
      out_got[i] = moe_from_bits(bf16, out_bits[i]);
      c2(out_got[i], out_ref[i], u * std::fabs(out_ref[i]) + 1e-5 * mag2[i] + 1e-6,
         "pair " + std::to_string(i / H) + " col " + std::to_string(i % H));
    }
    report(c2);

    // combine against the double sum of the kernel's pair_out.
    const auto y_bits =
        host_copy(static_cast<const std::uint16_t*>(y), static_cast<std::size_t>(Tn) * H);
    MoeChecker c3(std::string("combine ") + tag);
    for (int t = 0; t < Tn; ++t)
      for (int col = 0; col < H; ++col) {
        double s = 0, m = 0;
        for (int j = 0; j < k; ++j) {
          s += out_got[(static_cast<std::size_t>(t) * k + j) * H + col];
          m += std::fabs(out_got[(static_cast<std::size_t>(t) * k + j) * H + col]);
        }
        c3(moe_from_bits(bf16, y_bits[static_cast<std::size_t>(t) * H + col]), s,
           u * std::fabs(s) + 1e-6 * m + 1e-7, "token " + std::to_string(t));
      }
    report(c3);
  }

  d.free();
  cudaFree(dx), cudaFree(dw1), cudaFree(dw2), cudaFree(act), cudaFree(pair_out), cudaFree(y);
}

template <typename T>
void check_table(bool bf16) {
  std::mt19937 rng(bf16 ? 7 : 8);
  const auto ks = check_kernels();
  for (std::size_t ci = 0; ci + 1 < ks.size(); ci += 2)
    if (only_config < 0 || static_cast<int>(ci / 2) == only_config)
      for (int E : {1, 8})
        for (int Tn : {1, 3, 17, 100})
          for (int k : {1, 2}) {
            if (k > E) continue;
            // Odd sizes (not multiples of any tile) for most; one aligned shape per config.
            const bool aligned = Tn == 17 && k == 2 && E == 8;
            check_case<T>(bf16, ks[ci], &ks[ci + 1], E, Tn, k, aligned ? 256 : 136,
                          aligned ? 512 : 200, rng);
          }
}

/// Every timing kernel in bf16 on a few cases: gemm1 kernels alone (act checked), gemm2 kernels
/// fed by the first timing gemm1 of their block_m.
void check_timing() {
  std::mt19937 rng(11);
  const auto ks = timing_kernels();
  struct Case {
    int E, Tn, k, H, I;
  };
  const Case cases[] = {{8, 100, 2, 136, 200}, {1, 3, 1, 136, 200}, {8, 300, 2, 264, 392}};
  for (const Kern& g : ks) {
    if (!g.gated) continue;
    for (const Case& c : cases) check_case<bf16>(true, g, nullptr, c.E, c.Tn, c.k, c.H, c.I, rng);
  }
  for (const Kern& g : ks) {
    if (g.gated) continue;
    const Kern* feed = nullptr;
    for (const Kern& f : ks)
      if (f.gated && f.bm == g.bm) {
        feed = &f;
        break;
      }
    for (const Case& c : cases) check_case<bf16>(true, *feed, &g, c.E, c.Tn, c.k, c.H, c.I, rng);
  }
}

// ---------------------------------------------------------------------------------------------
// Timing

struct Buffers {
  void* w1[2];
  void* w2[2];
  void* x;
  void* act;
  void* out;
};

double copy_bw = 2.92e12;  // bytes/s, replaced by the measurement below

void measure_copy(void* a, void* b, std::size_t bytes) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e0));
  const int reps = 10;
  for (int i = 0; i < reps; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  copy_bw = 2.0 * bytes * reps / (ms * 1e-3);
  std::printf("copy bandwidth: %.3f TB/s (read + write, %zu MB)\n", copy_bw * 1e-12, bytes >> 20);
}

struct Result {
  std::string layer;
  int T, bm;
  std::string g1, g2;
  float t1, t2, both;
  double gb, gflop;
};
std::vector<Result> results;

void time_layer(const Layer& L, int Tn, const std::vector<int>& bms, const Buffers& b) {
  const int pairs = Tn * L.k;
  std::mt19937 rng(1000 + Tn);
  const MoeTestRouting r = moe_test_routing(Tn, L.E, L.k, rng, false);
  std::vector<int> used(L.E, 0);
  for (int id : r.ids) used[id] = 1;
  int experts = 0;
  for (int u : used) experts += u;
  const double gb = experts * 3.0 * L.H * L.I * 2 * 1e-9;
  const double gflop = 6.0 * pairs * L.H * L.I * 1e-9;
  const auto ks = timing_kernels();
  for (int bm : bms) {
    const MoeAlignment al = moe_align_host(r, bm);
    Dev d;
    d.upload(al, r);
    int blocks_used = al.padded_rows / bm;
    std::printf("%s T=%d bm=%d: %d experts (%.3f GB of weights), %d of %d blocks, %d padded rows "
                "for %d pairs\n",
                L.name, Tn, bm, experts, gb, blocks_used, al.max_blocks, al.padded_rows, pairs);
    const auto a1 = [&](int i) {
      return gemm1_args(b.x, b.w1[i & 1], b.act, d, pairs, L.k, L.H, L.I, al.max_blocks);
    };
    const auto a2 = [&](int i) {
      return gemm2_args(b.act, b.w2[i & 1], b.out, d, pairs, L.k, L.H, L.I, al.max_blocks);
    };
    const Kern* best1 = nullptr;
    const Kern* best2 = nullptr;
    float t1 = 1e30f, t2 = 1e30f;
    for (const Kern& g : ks) {
      if (g.bm != bm || !g.gated) continue;
      const float t = time_ms([&](int i) { g.launch(true, a1(i)); });
      std::printf("  gemm1 %-22s %8.4f ms  %6.1f%% of copy bw  %5.0f TFLOP/s\n", g.name().c_str(),
                  t, gb * 2 / 3 * 1e9 / (t * 1e-3) / copy_bw * 100.0, gflop * 2 / 3 / t);
      if (t < t1) t1 = t, best1 = &g;
    }
    if (!best1) {
      d.free();
      continue;
    }
    best1->launch(true, a1(0));  // real act values for gemm2
    for (const Kern& g : ks) {
      if (g.bm != bm || g.gated) continue;
      const float t = time_ms([&](int i) { g.launch(true, a2(i)); });
      std::printf("  gemm2 %-22s %8.4f ms  %6.1f%% of copy bw  %5.0f TFLOP/s\n", g.name().c_str(),
                  t, gb / 3 * 1e9 / (t * 1e-3) / copy_bw * 100.0, gflop / 3 / t);
      if (t < t2) t2 = t, best2 = &g;
    }
    if (!best2) {
      d.free();
      continue;
    }
    const float both = time_ms([&](int i) {
      best1->launch(true, a1(i));
      best2->launch(true, a2(i));
    });
    std::printf("  pair %s | %s: %.4f ms, %.1f%% of copy bw, %.0f TFLOP/s\n",
                best1->name().c_str(), best2->name().c_str(), both,
                gb * 1e9 / (both * 1e-3) / copy_bw * 100.0, gflop / both);
    results.push_back({L.name, Tn, bm, best1->name(), best2->name(), t1, t2, both, gb, gflop});
    d.free();
  }
}

void time_all(const std::string& only_layer, int t_min) {
  const std::size_t w1_max = 8ull * 2 * 14336 * 4096, w2_max = 8ull * 4096 * 14336;
  Buffers b;
  for (int i = 0; i < 2; ++i) {
    CK(cudaMalloc(&b.w1[i], w1_max * 2));
    CK(cudaMalloc(&b.w2[i], w2_max * 2));
    fill(b.w1[i], w1_max, 17 + i);
    fill(b.w2[i], w2_max, 29 + i);
  }
  const std::size_t x_max = 4096ull * 4096, act_max = (4096ull * 8 + 64 * 256) * 14336,
                    out_max = 4096ull * 8 * 4096;
  CK(cudaMalloc(&b.x, x_max * 2));
  CK(cudaMalloc(&b.act, act_max * 2));
  CK(cudaMalloc(&b.out, out_max * 2));
  fill(b.x, x_max, 5);
  fill(b.act, act_max, 7);
  CK(cudaDeviceSynchronize());
  measure_copy(b.w1[0], b.w1[1], w1_max * 2);
  fill(b.w1[1], w1_max, 18);

  struct Point {
    const Layer* L;
    int T;
    std::vector<int> bms;
  };
  const Point points[] = {
      {&kMixtral, 1, {16}},          {&kMixtral, 16, {16}},         {&kMixtral, 64, {16, 32}},
      {&kMixtral, 128, {16, 32, 64}}, {&kMixtral, 1024, {64, 128}}, {&kMixtral, 4096, {128, 256}},
      {&kDeepSeek, 1, {16}},         {&kDeepSeek, 16, {16}},        {&kDeepSeek, 64, {16, 32}},
      {&kDeepSeek, 128, {16, 32}},   {&kDeepSeek, 1024, {64, 128}}, {&kDeepSeek, 4096, {128}},
  };
  for (const Point& p : points)
    if ((only_layer.empty() || only_layer == p.L->name) && p.T >= t_min)
      time_layer(*p.L, p.T, p.bms, b);

  std::printf("\n%-8s %5s %4s %-20s %8s %-20s %8s %8s %6s %6s\n", "layer", "T", "bm",
              "gemm1", "ms", "gemm2", "ms", "pair ms", "%bw", "TF/s");
  for (const Result& r : results)
    std::printf("%-8s %5d %4d %-20s %8.4f %-20s %8.4f %8.4f %6.1f %6.0f\n",
                r.layer.c_str(), r.T, r.bm, r.g1.c_str(), r.t1, r.g2.c_str(), r.t2, r.both,
                r.gb * 1e9 / (r.both * 1e-3) / copy_bw * 100.0, r.gflop / r.both);
  for (int i = 0; i < 2; ++i) cudaFree(b.w1[i]), cudaFree(b.w2[i]);
  cudaFree(b.x), cudaFree(b.act), cudaFree(b.out);
}

/// The ceiling of the GEMMs: dense mma.sync m16n8k16 (bf16, fp32 accumulators) from registers,
/// no memory traffic, 8 independent accumulators per warp; 8 or 16 warps per SM. Thread 0 of
/// CTA 0 reads the SM clock against the global timer, so the rate comes with its clock.
__global__ void __launch_bounds__(256) mma_peak_kernel(float* out, long long* clk, int iters) {
  const unsigned lane = threadIdx.x & 31;
  const unsigned a[4] = {pack2<bf16>(0.01f * lane, -0.02f), pack2<bf16>(0.03f, 0.01f * lane),
                         pack2<bf16>(-0.01f * lane, 0.02f), pack2<bf16>(0.02f, -0.01f)};
  const unsigned b0 = pack2<bf16>(0.5f, -0.25f * lane), b1 = pack2<bf16>(0.125f * lane, 0.5f);
  float acc[8][4] = {};
  long long c0 = clock64(), t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int j = 0; j < 8; ++j) attn::mma_16816<bf16>(acc[j], a, b0, b1);
  float sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (sum == 1.2345f) out[threadIdx.x] = sum;
  long long c1 = clock64(), t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (blockIdx.x == 0 && threadIdx.x == 0) clk[0] = c1 - c0, clk[1] = t1 - t0;
}

void mma_peak() {
  float* out;
  long long* clk;
  CK(cudaMalloc(&out, 1024 * sizeof(float)));
  CK(cudaMalloc(&clk, 2 * sizeof(long long)));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int iters = 20000;
  for (int per_sm : {1, 2, 4}) {
    const int ctas = sms * per_sm;
    const float ms = time_ms([&](int) { mma_peak_kernel<<<ctas, 256>>>(out, clk, iters); });
    long long c[2];
    CK(cudaMemcpy(c, clk, sizeof c, cudaMemcpyDeviceToHost));
    const double flop = 2.0 * 16 * 8 * 16 * 8.0 * iters * ctas * 8;
    std::printf("mma.sync peak: %d warps/SM: %.4f ms, %.0f TFLOP/s, SM clock %.0f MHz, "
                "%.0f FMA/clk/SM\n",
                per_sm * 8, ms, flop / (ms * 1e-3) * 1e-12, 1e3 * c[0] / c[1],
                flop / 2 / (ms * 1e-3) / sms / (1e9 * c[0] / c[1]));
  }
  cudaFree(out), cudaFree(clk);
}

/// prof layer=L t=T g1=NAME g2=NAME: one warm-up and one launch of each (ncu picks them).
void profile(const std::string& layer, int Tn, const std::string& n1, const std::string& n2) {
  const Layer& L = layer == "deepseek" ? kDeepSeek : kMixtral;
  const auto ks = timing_kernels();
  const Kern* g1 = nullptr;
  const Kern* g2 = nullptr;
  for (const Kern& g : ks) {
    if (g.gated && g.name() == n1) g1 = &g;
    if (!g.gated && g.name() == n2) g2 = &g;
  }
  if (!g1 || !g2 || g1->bm != g2->bm) {
    std::fprintf(stderr, "prof: unknown kernels or block_m differs\n");
    std::exit(2);
  }
  const int pairs = Tn * L.k;
  std::mt19937 rng(1000 + Tn);
  const MoeTestRouting r = moe_test_routing(Tn, L.E, L.k, rng, false);
  const MoeAlignment al = moe_align_host(r, g1->bm);
  Dev d;
  d.upload(al, r);
  void *w1, *w2, *x, *act, *out;
  const std::size_t n1e = static_cast<std::size_t>(L.E) * 2 * L.I * L.H,
                    n2e = static_cast<std::size_t>(L.E) * L.H * L.I;
  CK(cudaMalloc(&w1, n1e * 2));
  CK(cudaMalloc(&w2, n2e * 2));
  CK(cudaMalloc(&x, static_cast<std::size_t>(Tn) * L.H * 2));
  CK(cudaMalloc(&act, al.sorted_pairs.size() * L.I * 2));
  CK(cudaMalloc(&out, static_cast<std::size_t>(pairs) * L.H * 2));
  fill(w1, n1e, 1), fill(w2, n2e, 2), fill(x, static_cast<std::size_t>(Tn) * L.H, 3);
  for (int i = 0; i < 2; ++i) {
    g1->launch(true, gemm1_args(x, w1, act, d, pairs, L.k, L.H, L.I, al.max_blocks));
    g2->launch(true, gemm2_args(act, w2, out, d, pairs, L.k, L.H, L.I, al.max_blocks));
  }
  CK(cudaDeviceSynchronize());
  std::printf("prof %s T=%d %s | %s done\n", L.name, Tn, n1.c_str(), n2.c_str());
}

int main(int argc, char** argv) {
  bool check = false, time = false, prof = false, peak = false;
  std::string layer, g1, g2;
  int Tn = 16, t_min = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "check") check = true;
    if (a == "time") time = true;
    if (a == "prof") prof = true;
    if (a == "peak") peak = true;
    if (a.rfind("only=", 0) == 0) only_config = std::atoi(a.c_str() + 5);
    if (a.rfind("part=", 0) == 0 && std::sscanf(a.c_str() + 5, "%d/%d", &part, &parts) != 2)
      return 2;
    if (a.rfind("layer=", 0) == 0) layer = a.substr(6);
    if (a.rfind("t=", 0) == 0) Tn = std::atoi(a.c_str() + 2);
    if (a.rfind("tmin=", 0) == 0) t_min = std::atoi(a.c_str() + 5);
    if (a.rfind("g1=", 0) == 0) g1 = a.substr(3);
    if (a.rfind("g2=", 0) == 0) g2 = a.substr(3);
  }
  if (check) {
    check_table<bf16>(true);
    check_table<fp16>(false);
    if (only_config < 0) check_timing();
    std::printf("check: %d failures\n", failures);
  }
  if (peak) mma_peak();
  if (time) time_all(layer, t_min);
  if (prof) profile(layer, Tn, g1, g2);
  return failures ? 1 : 0;
}
