// Development harness for the warp-specialised grouped GEMMs (templates/moe/gemm_ws_sm90.cuh,
// impl=2) beside the wgmma kernel without specialisation (gemm_sm90.cuh, impl=1).
//
//   check: every ws configuration of check_table() (bf16 and fp16, the three gathers: cp.async,
//          a TMA box per row, rows gathered in sorted order by the op's gather first) on odd shapes
//          (H, I not multiples of any tile; T odd; E 1, 8, 64; k 1, 2, 8) against the double
//          references of tests/support/moe_gemm_reference.hpp: gemm1 (padding rows of act must
//          stay NaN), gemm2 fed with the kernel's act (pair_out NaN-poisoned first).
//   time:  gemm1 and gemm2 of every timing configuration (impl 1 and 2) on the Mixtral
//          (E=8, k=2, H=4096, I=14336) and DeepSeek-like (E=64, k=8, H=2048, I=1408) layers at
//          T = 1024 and 4096, uniform random routing, weights rotating between two copies; the
//          best gemm1 and gemm2 of each impl and their pair back to back; gemm1 on rows already
//          sorted (GATHER 2) is timed alone and with the op's gather kernel, and both GEMMs in
//          clusters of two along y sharing the act tile (CLUSTER 3; stop 69, the clusters along
//          N proposed in benchmarks/moe/NOTES.md; the check table has them too), and gemm1 on
//          sorted rows in clusters of two along x sharing the weight tile (CLUSTER 2 with
//          GATHER 2, stop 70: the op's cluster1=2 takes only the cp.async gather so far).
//
// Build (nvcc 13, here or on the GPU machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/gemm_ws_dev.cu -o gemm_ws_dev -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "moe/gather_rows.cuh"
#include "moe/gemm_sm90.cuh"
#include "moe/gemm_ws_sm90.cuh"
#include "benchmarks/moe/dev_tma.hpp"
#include "benchmarks/moe/dev_util.cuh"
#include "tests/support/moe_gemm_reference.hpp"

using namespace ktune;
using namespace ktune::test;

// ---- tensor maps (encode: benchmarks/moe/dev_tma.hpp) ----

/// gemm1's maps: x [x_rows, H] box 64 x 1; w1 as {H, I, 2, E} box 64 x bn.
MoeGemmWsArgs ws_args1(const MoeGemmArgs& a, bool bf16, int x_rows, int E, int bn) {
  MoeGemmWsArgs w{};
  const cuuint64_t H = a.kdim, I = a.n;
  w.a_map = encode(a.a, bf16, {H, static_cast<cuuint64_t>(x_rows)}, {H * 2}, {64, 1});
  w.w_map = encode(a.w, bf16, {H, I, 2, static_cast<cuuint64_t>(E)},
                   {H * 2, I * H * 2, 2 * I * H * 2}, {64, static_cast<cuuint32_t>(bn), 1, 1});
  w.base = a;
  return w;
}

/// gemm2's maps: act [act_rows, I] box 64 x bm; w2 as {I, H, E} box 64 x bn.
MoeGemmWsArgs ws_args2(const MoeGemmArgs& a, bool bf16, int act_rows, int E, int bm, int bn) {
  MoeGemmWsArgs w{};
  const cuuint64_t I = a.kdim, H = a.n;
  w.a_map = encode(a.a, bf16, {I, static_cast<cuuint64_t>(act_rows)}, {I * 2},
                   {64, static_cast<cuuint32_t>(bm)});
  w.w_map = encode(a.w, bf16, {I, H, static_cast<cuuint64_t>(E)}, {I * 2, H * I * 2},
                   {64, static_cast<cuuint32_t>(bn), 1});
  w.base = a;
  return w;
}

/// gemm1's maps on rows already gathered in sorted order (GATHER 2): xs [rows, H] box 64 x bm.
MoeGemmWsArgs ws_args1_sorted(const MoeGemmArgs& a, bool bf16, int rows, int E, int bm,
                              int bn) {
  MoeGemmWsArgs w = ws_args1(a, bf16, 1, E, bn);
  const cuuint64_t H = a.kdim;
  w.a_map = encode(a.a, bf16, {H, static_cast<cuuint64_t>(rows)}, {H * 2},
                   {64, static_cast<cuuint32_t>(bm)});
  return w;
}

/// xs: x's rows in sorted order through the op's own gather kernel (moe/gather_rows.cuh, a
/// block per row of the max_blocks * block_m rows, zeros past the real ones).
void launch_gather(const MoeGemmArgs& a, int rows, void* xs) {
  const MoeGatherRowsArgs g{a.a, xs, a.sorted_pairs, a.padded_rows, nullptr, a.pairs, a.k,
                            a.kdim, rows};
  moe_gather_rows_kernel<bf16><<<rows, kMoeGatherThreads>>>(g);  // bits copied: fp16 alike
}

// ---- kernels ----

/// One configuration: impl 1 (gemm_sm90.cuh) or 2 (gemm_ws_sm90.cuh).
struct Kern {
  int impl, bm, bn, stages, group, gather;
  bool gated;
  void (*bf16_launch)(dim3, const MoeGemmWsArgs&);
  void (*fp16_launch)(dim3, const MoeGemmWsArgs&);
  // 2: pairs along x sharing the weight tile (its map's box: half the columns); 3: pairs along
  // y sharing the act tile (its map's box: half the rows).
  int cluster = 1;
  std::string name() const {
    char b[96];
    std::snprintf(b, sizeof b, "i%d %dx%d s%d g%d%s%s", impl, bm, bn, stages, group,
                  impl == 2 && gated ? (gather == 2 ? " srt" : gather ? " tma" : " cpa") : "",
                  cluster == 3 ? " c3" : cluster == 2 ? " c2" : "");
    return b;
  }
  int box_rows() const { return cluster == 3 ? bm / 2 : bm; }
  int w_box() const { return cluster == 2 ? bn / 2 : bn; }
  void launch(bool bf16, const MoeGemmWsArgs& a) const {
    const dim3 grid(a.base.max_blocks, moe_gemm_grid_y(a.base.n, bn));
    (bf16 ? bf16_launch : fp16_launch)(grid, a);
  }
};

template <typename T, int BM, int BN, int S, bool G, int GR>
void launch_sm90(dim3 grid, const MoeGemmWsArgs& a) {
  auto k = moe_gemm_sm90_kernel<T, BM, BN, 64, S, G, GR>;
  const unsigned smem = moe_gemm_sm90_smem_bytes(BM, BN, 64, S, G);
  static bool once = [&] {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)once;
  k<<<grid, moe_gemm_sm90_threads(BM), smem>>>(a.base);
}

/// CL 2 / 3: clusters of two along x / y (that grid dimension rounded up to even), as the op
/// launches them.
template <typename T, int BM, int BN, int S, bool G, int GR, int GA, int CL = 1>
void launch_ws(dim3 grid, const MoeGemmWsArgs& a) {
  auto k = moe_gemm_ws_kernel<T, BM, BN, S, G, GR, GA, CL>;
  const unsigned smem = moe_gemm_ws_smem_bytes(BM, BN, S, G);
  static bool once = [&] {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)once;
  if constexpr (CL == 3)
    launch_clustered(k, dim3(grid.x, (grid.y + 1) & ~1u), moe_gemm_ws_threads(BM), smem,
                     dim3(1, 2, 1), a);
  else if constexpr (CL == 2)
    launch_clustered(k, dim3((grid.x + 1) & ~1u, grid.y), moe_gemm_ws_threads(BM), smem,
                     dim3(2, 1, 1), a);
  else
    k<<<grid, moe_gemm_ws_threads(BM), smem>>>(a);
}

#define WS(BM, BN, S, G, GR, GA)                                                   \
  Kern {                                                                           \
    2, BM, BN, S, GR, GA, G, launch_ws<bf16, BM, BN, S, G, GR, GA>,                \
        launch_ws<fp16, BM, BN, S, G, GR, GA>                                      \
  }
#define WSC3(BM, BN, S, G, GR, GA)                                                 \
  Kern {                                                                           \
    2, BM, BN, S, GR, GA, G, launch_ws<bf16, BM, BN, S, G, GR, GA, 3>,             \
        launch_ws<fp16, BM, BN, S, G, GR, GA, 3>, 3                                \
  }
#define WSC2(BM, BN, S, G, GR, GA)                                                 \
  Kern {                                                                           \
    2, BM, BN, S, GR, GA, G, launch_ws<bf16, BM, BN, S, G, GR, GA, 2>,             \
        launch_ws<fp16, BM, BN, S, G, GR, GA, 2>, 2                                \
  }
#define S90(BM, BN, S, G, GR)                                                          \
  Kern {                                                                               \
    1, BM, BN, S, GR, 0, G, launch_sm90<bf16, BM, BN, S, G, GR>,                       \
        launch_sm90<fp16, BM, BN, S, G, GR>                                            \
  }

/// Pairs (gemm1, gemm2) of one block_m, checked together.
std::vector<std::pair<Kern, Kern>> check_table() {
  return {
      {WS(128, 128, 4, true, 0, 1), WS(128, 256, 4, false, 8, 1)},
      {WS(128, 128, 4, true, 0, 0), WS(128, 128, 6, false, 0, 1)},
      {WS(128, 128, 4, true, 0, 2), WS(128, 256, 4, false, 8, 1)},
      {WS(64, 64, 3, true, 8, 2), WS(64, 64, 3, false, 0, 1)},
      {WSC3(128, 128, 4, true, 0, 2), WSC3(128, 256, 4, false, 8, 1)},
      {WSC3(64, 64, 3, true, 8, 2), WSC3(64, 64, 3, false, 0, 1)},
      {WS(128, 128, 4, true, 0, 0), WSC3(128, 128, 6, false, 0, 1)},
      {WSC2(128, 128, 4, true, 0, 2), WS(128, 256, 4, false, 8, 1)},
      {WSC2(64, 64, 3, true, 8, 2), WS(64, 64, 3, false, 0, 1)},
      {WS(64, 128, 5, true, 0, 1), WS(64, 256, 4, false, 0, 1)},
      {WS(64, 64, 2, true, 8, 0), WS(64, 64, 3, false, 0, 1)},
      {WS(128, 64, 6, true, 0, 1), WS(128, 128, 2, false, 0, 1)},
  };
}

std::vector<Kern> timing_table() {
  return {
      S90(128, 128, 4, true, 0),     S90(128, 64, 6, true, 0),      S90(128, 256, 4, false, 8),
      S90(128, 128, 5, false, 8),    WS(128, 128, 4, true, 0, 1),   WS(128, 128, 4, true, 0, 0),
      WS(128, 128, 4, true, 8, 1),   WS(128, 64, 6, true, 0, 1),    WS(64, 128, 5, true, 0, 1),
      WS(128, 128, 4, true, 0, 2),   WS(128, 128, 4, true, 8, 2),   WSC3(128, 128, 4, true, 0, 2),
      WSC3(128, 128, 4, true, 8, 2), WSC3(128, 256, 4, false, 8, 1), WSC3(128, 256, 4, false, 0, 1),
      WS(128, 256, 4, false, 8, 1),  WS(128, 256, 4, false, 0, 1),  WS(128, 128, 6, false, 8, 1),
      WS(64, 256, 4, false, 8, 1),   WSC2(128, 128, 4, true, 0, 2), WSC2(128, 128, 4, true, 8, 2),
  };
}

// ---- check ----

void check_case(bool bf16, const Kern& g1, const Kern& g2, int E, int Tn, int k, int H, int I,
                std::mt19937& rng) {
  const MoeTestRouting r = moe_test_routing(Tn, E, k, rng);
  const MoeAlignment al = moe_align_host(r, g1.bm);
  const int pairs = Tn * k;
  const MoeTensor x(bf16, static_cast<std::size_t>(Tn) * H, rng);
  const MoeTensor w1(bf16, static_cast<std::size_t>(E) * 2 * I * H, rng, -0.5, 0.5);
  const MoeTensor w2(bf16, static_cast<std::size_t>(E) * H * I, rng, -0.5, 0.5);
  int* sorted = dev_copy(al.sorted_pairs);
  int* bexp = dev_copy(al.block_expert);
  int* padded = dev_copy(std::vector<int>{al.padded_rows});
  float* weights = dev_copy(r.weights);
  auto* dx = dev_copy(x.bits);
  auto* dw1 = dev_copy(w1.bits);
  auto* dw2 = dev_copy(w2.bits);
  const std::size_t rows = al.sorted_pairs.size();
  void* act = dev_nan(rows * I);
  void* pair_out = dev_nan(static_cast<std::size_t>(pairs) * H);

  const MoeGemmArgs a1{dx, dw1, act, sorted, bexp, padded, nullptr, pairs, k, I, H,
                       al.max_blocks, nullptr};
  const MoeGemmArgs a2{act, dw2, pair_out, sorted, bexp, padded, weights, pairs, k, H, I,
                       al.max_blocks, nullptr};
  void* xs = nullptr;
  if (g1.gather == 2) {
    xs = dev_nan(rows * H);
    launch_gather(a1, static_cast<int>(rows), xs);
    MoeGemmArgs s1 = a1;
    s1.a = xs;
    g1.launch(bf16,
              ws_args1_sorted(s1, bf16, static_cast<int>(rows), E, g1.box_rows(), g1.w_box()));
  } else {
    g1.launch(bf16, ws_args1(a1, bf16, Tn, E, g1.w_box()));
  }
  CK(cudaGetLastError());
  g2.launch(bf16, ws_args2(a2, bf16, static_cast<int>(rows), E, g2.box_rows(), g2.w_box()));
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  const double u = moe_unit(bf16);
  char tag[200];
  std::snprintf(tag, sizeof tag, "%s %s / %s E=%d T=%d k=%d H=%d I=%d", bf16 ? "bf16" : "fp16",
                g1.name().c_str(), g2.name().c_str(), E, Tn, k, H, I);
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

  std::vector<double> out_ref, mag2;
  moe_gemm2_ref(r, al, act_got, w2.val, H, I, out_ref, mag2);
  const auto out_bits = host_copy(static_cast<const std::uint16_t*>(pair_out),
                                  static_cast<std::size_t>(pairs) * H);
  MoeChecker c2(std::string("gemm2 ") + tag);
  for (std::size_t i = 0; i < out_bits.size(); ++i)
    c2(moe_from_bits(bf16, out_bits[i]), out_ref[i],
       u * std::fabs(out_ref[i]) + 1e-5 * mag2[i] + 1e-6,
       "pair " + std::to_string(i / H) + " col " + std::to_string(i % H));
  report(c2);

  cudaFree(sorted), cudaFree(bexp), cudaFree(padded), cudaFree(weights);
  cudaFree(dx), cudaFree(dw1), cudaFree(dw2), cudaFree(act), cudaFree(pair_out);
  if (xs) cudaFree(xs);
}

void check_all() {
  struct Case {
    int E, Tn, k, H, I;
  };
  const Case cases[] = {{1, 1, 1, 136, 200},  {8, 3, 2, 136, 200},  {8, 17, 2, 256, 512},
                        {8, 100, 2, 136, 200}, {8, 301, 2, 264, 392}, {64, 37, 8, 136, 200},
                        {8, 129, 1, 200, 136}};
  for (bool bf16 : {true, false}) {
    std::mt19937 rng(bf16 ? 7 : 8);
    for (const auto& [g1, g2] : check_table())
      for (const Case& c : cases) {
        if (!bf16 && c.Tn > 100) continue;
        check_case(bf16, g1, g2, c.E, c.Tn, c.k, c.H, c.I, rng);
      }
  }
  std::printf("check: %d of %d failed\n", failures, checks);
}

// ---- timing ----

void time_all() {
  const Layer layers[] = {kMixtral, kDeepSeek};
  const std::size_t w1_max = 8ull * 2 * 14336 * 4096, w2_max = 8ull * 4096 * 14336;
  void *w1[2], *w2[2], *x, *act, *out;
  for (int i = 0; i < 2; ++i) {
    CK(cudaMalloc(&w1[i], w1_max * 2));
    CK(cudaMalloc(&w2[i], w2_max * 2));
    fill(w1[i], w1_max, 17 + i);
    fill(w2[i], w2_max, 29 + i);
  }
  const std::size_t x_max = 4096ull * 4096, act_max = (4096ull * 8 + 64 * 256) * 14336,
                    out_max = 4096ull * 8 * 4096;
  void* xs;  // x's rows in sorted order (GATHER 2), up to the longest act
  CK(cudaMalloc(&x, x_max * 2));
  CK(cudaMalloc(&xs, (4096ull * 8 + 64 * 256) * 4096 * 2));
  CK(cudaMalloc(&act, act_max * 2));
  CK(cudaMalloc(&out, out_max * 2));
  fill(x, x_max, 5);
  fill(act, act_max, 7);
  CK(cudaDeviceSynchronize());
  const auto table = timing_table();
  std::printf("\n%-8s %5s %-22s %8s %6s\n", "layer", "T", "kernel", "ms", "TF/s");
  std::vector<std::string> summary;
  for (const Layer& L : layers)
    for (int Tn : {1024, 4096}) {
      const int pairs = Tn * L.k;
      std::mt19937 rng(1000 + Tn);
      const MoeTestRouting r = moe_test_routing(Tn, L.E, L.k, rng, false);
      const double gflop = 6.0 * pairs * L.H * L.I * 1e-9;
      const MoeAlignment al = moe_align_host(r, 128);
      const MoeAlignment al64 = moe_align_host(r, 64);
      int* sorted[2] = {dev_copy(al64.sorted_pairs), dev_copy(al.sorted_pairs)};
      int* bexp[2] = {dev_copy(al64.block_expert), dev_copy(al.block_expert)};
      int* padded[2] = {dev_copy(std::vector<int>{al64.padded_rows}),
                        dev_copy(std::vector<int>{al.padded_rows})};
      float* weights = dev_copy(r.weights);
      const int maxb[2] = {al64.max_blocks, al.max_blocks};
      const int act_rows[2] = {static_cast<int>(al64.sorted_pairs.size()),
                               static_cast<int>(al.sorted_pairs.size())};
      float best1[3] = {1e30f, 1e30f, 1e30f}, best2[3] = {1e30f, 1e30f, 1e30f};
      const Kern* k1[3] = {};
      const Kern* k2[3] = {};
      // gemm1 args per (block_m, weight copy, block_n) are built before timing.
      const auto args = [&](const Kern& g, int copy) {
        const int b = g.bm == 128;
        if (g.gated) {
          const MoeGemmArgs a{g.gather == 2 ? xs : x, w1[copy], act, sorted[b], bexp[b],
                              padded[b], nullptr, pairs, L.k, L.I, L.H, maxb[b], nullptr};
          return g.gather == 2
                     ? ws_args1_sorted(a, true, act_rows[b], L.E, g.box_rows(), g.w_box())
                     : ws_args1(a, true, Tn, L.E, g.w_box());
        }
        const MoeGemmArgs a{act, w2[copy], out, sorted[b], bexp[b], padded[b], weights, pairs,
                            L.k, L.H, L.I, maxb[b], nullptr};
        return ws_args2(a, true, act_rows[b], L.E, g.box_rows(), g.w_box());
      };
      for (const Kern& g : table) {
        const MoeGemmWsArgs a[2] = {args(g, 0), args(g, 1)};
        if (g.gather == 2) {
          // Its rows gathered first; the gather timed alone and with the GEMM.
          const int b = g.bm == 128;
          const MoeGemmArgs ga{x, w1[0], act, sorted[b], bexp[b], padded[b], nullptr, pairs,
                               L.k, L.I, L.H, maxb[b], nullptr};
          const float tg = time_ms([&](int) { launch_gather(ga, act_rows[b], xs); });
          const float both = time_ms([&](int i) {
            launch_gather(ga, act_rows[b], xs);
            g.launch(true, a[i & 1]);
          });
          std::printf("%-8s %5d %-22s %8.4f  gather_sorted alone; with %s %8.4f\n", L.name, Tn,
                      "gather_sorted", tg, g.name().c_str(), both);
        }
        const float t = time_ms([&](int i) { g.launch(true, a[i & 1]); });
        const double f = gflop * (g.gated ? 2.0 / 3 : 1.0 / 3);
        std::printf("%-8s %5d %-22s %8.4f %6.0f  gemm%d\n", L.name, Tn, g.name().c_str(), t,
                    f / t, g.gated ? 1 : 2);
        float* best = g.gated ? best1 : best2;
        const Kern** kb = g.gated ? k1 : k2;
        // Pairs are timed without the gather: GATHER 2 stays out of them.
        if (g.gather != 2 && t < best[g.impl]) best[g.impl] = t, kb[g.impl] = &g;
      }
      for (int impl : {1, 2}) {
        // The pair shares block_m: take the best gemm2 with the best gemm1's block_m.
        const Kern* g1 = k1[impl];
        const Kern* g2 = nullptr;
        float t2 = 1e30f;
        for (const Kern& g : table)
          if (!g.gated && g.impl == impl && g.bm == g1->bm) {
            const MoeGemmWsArgs a[2] = {args(g, 0), args(g, 1)};
            const float t = time_ms([&](int i) { g.launch(true, a[i & 1]); });
            if (t < t2) t2 = t, g2 = &g;
          }
        if (!g2) continue;
        const MoeGemmWsArgs a1[2] = {args(*g1, 0), args(*g1, 1)};
        const MoeGemmWsArgs a2[2] = {args(*g2, 0), args(*g2, 1)};
        const float both = time_ms([&](int i) {
          g1->launch(true, a1[i & 1]);
          g2->launch(true, a2[i & 1]);
        });
        char line[256];
        std::snprintf(line, sizeof line,
                      "%-8s %5d impl%d  gemm1 %-20s %7.4f  gemm2 %-20s %7.4f  pair %7.4f ms "
                      "%5.0f TF/s",
                      L.name, Tn, impl, g1->name().c_str(), best1[impl], g2->name().c_str(), t2,
                      both, gflop / both);
        summary.push_back(line);
      }
      for (int b = 0; b < 2; ++b) cudaFree(sorted[b]), cudaFree(bexp[b]), cudaFree(padded[b]);
      cudaFree(weights);
    }
  std::printf("\nsummary (best pair per impl; GEMMs only, not graph-captured)\n");
  for (const std::string& s : summary) std::printf("%s\n", s.c_str());
}

int main(int argc, char** argv) {
  bool check = false, time = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "check")) check = true;
    if (!std::strcmp(argv[i], "time")) time = true;
  }
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  if (check) check_all();
  if (time) time_all();
  return failures ? 1 : 0;
}
