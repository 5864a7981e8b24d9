// Development harness for templates/moe/gemm.cuh and combine.cuh: checks a table of
// configurations against the double references of tests/support/moe_gemm_reference.hpp (host
// routing and alignment, outputs poisoned with NaN), then times gemm1 and gemm2 on the Mixtral
// shape (E=8, k=2, H=4096, I=14336) at T=1024 with uniform random routing.
//
// Build (on the GPU machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/gemm_dev.cu -o gemm_dev
// Run: ./gemm_dev [check] [time] [only=N]   (no argument: check and time; only=N checks
// configs()[N] alone, for compute-sanitizer)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "moe/combine.cuh"
#include "moe/gemm.cuh"
#include "tests/support/moe_gemm_reference.hpp"

using namespace ktune;
using namespace ktune::test;

#define CK(x) check_cuda((x), #x, __FILE__, __LINE__)
static void check_cuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    std::exit(2);
  }
}

struct Config {
  int bm, bn, bk, warps, warps_m, stages;
  void (*gemm1)(dim3, dim3, unsigned, MoeGemmArgs);
  void (*gemm2)(dim3, dim3, unsigned, MoeGemmArgs);
  std::string name() const {
    char b[96];
    std::snprintf(b, sizeof b, "bm=%d bn=%d bk=%d warps=%d warps_m=%d stages=%d", bm, bn, bk,
                  warps, warps_m, stages);
    return b;
  }
};

template <typename T, int BM, int BN, int BK, int W, int WM, int S, bool G>
void launch_gemm(dim3 grid, dim3 block, unsigned smem, MoeGemmArgs a) {
  auto k = moe_gemm_kernel<T, BM, BN, BK, W, WM, S, G>;
  static bool once = [&] {
    // The dynamic limit plus the kernel's static shared memory must stay within 227 KiB.
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(moe_gemm_smem_bytes(BM, BN, BK, S, G))));
    return true;
  }();
  (void)once;
  k<<<grid, block, smem>>>(a);
}

#define CFG(T, BM, BN, BK, W, WM, S)                                                       \
  Config {                                                                                \
    BM, BN, BK, W, WM, S, launch_gemm<T, BM, BN, BK, W, WM, S, true>,                     \
        launch_gemm<T, BM, BN, BK, W, WM, S, false>                                       \
  }

template <typename T>
std::vector<Config> configs() {
  return {
      CFG(T, 64, 64, 64, 4, 2, 3),   CFG(T, 16, 64, 64, 4, 1, 4),  CFG(T, 128, 128, 32, 8, 2, 3),
      CFG(T, 32, 32, 128, 2, 1, 2),  CFG(T, 128, 64, 64, 4, 4, 4), CFG(T, 16, 128, 64, 8, 1, 5),
      CFG(T, 64, 128, 64, 8, 2, 3),
  };
}

template <typename T>
std::vector<Config> timing_configs() {
  return {
      CFG(T, 128, 128, 64, 8, 2, 3), CFG(T, 128, 128, 32, 8, 2, 4), CFG(T, 128, 64, 64, 4, 2, 4),
      CFG(T, 64, 128, 64, 4, 2, 4),  CFG(T, 128, 128, 64, 8, 4, 4), CFG(T, 64, 64, 64, 4, 2, 4),
      CFG(T, 64, 256, 64, 8, 1, 3),
  };
}

template <typename X>
X* dev_copy(const std::vector<X>& v) {
  X* p;
  CK(cudaMalloc(&p, v.size() * sizeof(X) + 16));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(X), cudaMemcpyHostToDevice));
  return p;
}

template <typename X>
std::vector<X> host_copy(const X* p, std::size_t n) {
  std::vector<X> v(n);
  CK(cudaMemcpy(v.data(), p, n * sizeof(X), cudaMemcpyDeviceToHost));
  return v;
}

void* dev_nan(std::size_t elems16) {  // 16-bit elements, all NaN (0xffff in both types)
  void* p;
  CK(cudaMalloc(&p, elems16 * 2 + 16));
  CK(cudaMemset(p, 0xff, elems16 * 2 + 16));
  return p;
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

int failures = 0;
int only_config = -1;  // only=N: check configs[N] alone (for compute-sanitizer)

void report(const MoeChecker& c) {
  if (c.failed) {
    ++failures;
    std::printf("FAIL %s: %lld of %lld, first: %s\n", c.what.c_str(), c.failed, c.checked,
                c.first.c_str());
  } else {
    std::printf("ok   %s: %lld values, worst err/tol %.3f\n", c.what.c_str(), c.checked, c.worst);
  }
}

template <typename T>
void check_case(bool bf16, const Config& cfg, int E, int Tn, int k, int H, int I,
                std::mt19937& rng) {
  const MoeTestRouting r = moe_test_routing(Tn, E, k, rng);
  const MoeAlignment al = moe_align_host(r, cfg.bm);
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

  MoeGemmArgs g1{dx, dw1, act, d.sorted, d.block_expert, d.padded, nullptr, pairs, k, I, H,
                 al.max_blocks};
  cfg.gemm1(dim3(al.max_blocks, moe_gemm_grid_y(I, cfg.bn)), dim3(cfg.warps * 32),
            moe_gemm_smem_bytes(cfg.bm, cfg.bn, cfg.bk, cfg.stages, true), g1);
  CK(cudaGetLastError());
  MoeGemmArgs g2{act, dw2, pair_out, d.sorted, d.block_expert, d.padded, d.weights, pairs, k, H,
                 I, al.max_blocks};
  cfg.gemm2(dim3(al.max_blocks, moe_gemm_grid_y(H, cfg.bn)), dim3(cfg.warps * 32),
            moe_gemm_smem_bytes(cfg.bm, cfg.bn, cfg.bk, cfg.stages, false), g2);
  CK(cudaGetLastError());
  MoeCombineArgs c{pair_out, y, Tn, k, H};
  moe_combine_kernel<T, 128, 8><<<dim3(Tn, moe_combine_grid_y(H, 128, 8)), 128>>>(c);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  const double u = moe_unit(bf16);
  char tag[200];
  std::snprintf(tag, sizeof tag, "%s %s E=%d T=%d k=%d H=%d I=%d", bf16 ? "bf16" : "fp16",
                cfg.name().c_str(), E, Tn, k, H, I);

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

  // gemm2 against the double reference fed with the kernel's act.
  std::vector<double> out_ref, mag2;
  moe_gemm2_ref(r, al, act_got, w2.val, H, I, out_ref, mag2);
  const auto out_bits =
      host_copy(static_cast<const std::uint16_t*>(pair_out), static_cast<std::size_t>(pairs) * H);
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

  d.free();
  cudaFree(dx), cudaFree(dw1), cudaFree(dw2), cudaFree(act), cudaFree(pair_out), cudaFree(y);
}

template <typename T>
void check_all(bool bf16) {
  std::mt19937 rng(bf16 ? 7 : 8);
  const auto cfgs = configs<T>();
  for (std::size_t ci = 0; ci < cfgs.size(); ++ci)
    if (only_config < 0 || static_cast<int>(ci) == only_config)
    for (int E : {1, 8})
      for (int Tn : {1, 3, 17, 100})
        for (int k : {1, 2}) {
          if (k > E) continue;
          // Odd sizes (not multiples of any tile) for most; one aligned shape per config.
          const bool aligned = Tn == 17 && k == 2 && E == 8;
          check_case<T>(bf16, cfgs[ci], E, Tn, k, aligned ? 256 : 136, aligned ? 512 : 200, rng);
        }
}

template <typename T>
void time_mixtral(bool bf16) {
  const int E = 8, k = 2, H = 4096, I = 14336, Tn = 1024, pairs = Tn * k;
  std::mt19937 rng(3);
  const MoeTestRouting r = moe_test_routing(Tn, E, k, rng, false);
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(Tn) * H),
      w1b(static_cast<std::size_t>(E) * 2 * I * H), w2b(static_cast<std::size_t>(E) * H * I);
  // A table of random values spread by a multiplicative hash: billions of rng calls are slow.
  std::uniform_int_distribution<int> ud(-64, 64);
  std::vector<std::uint16_t> table(4096);
  for (auto& b : table) b = moe_to_bits(bf16, (ud(rng) | 1) / 256.0);
  for (auto* v : {&xb, &w1b, &w2b})
    for (std::size_t i = 0; i < v->size(); ++i)
      (*v)[i] = table[(static_cast<std::uint32_t>(i) * 0x9E3779B1u) >> 20];
  auto* dx = dev_copy(xb);
  auto* dw1 = dev_copy(w1b);
  auto* dw2 = dev_copy(w2b);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double flops1 = 2.0 * pairs * H * 2.0 * I, flops2 = 2.0 * pairs * H * I;
  for (const Config& cfg : timing_configs<T>()) {
    const MoeAlignment al = moe_align_host(r, cfg.bm);
    Dev d;
    d.upload(al, r);
    void* act = dev_nan(al.sorted_pairs.size() * I);
    void* pair_out = dev_nan(static_cast<std::size_t>(pairs) * H);
    MoeGemmArgs g1{dx, dw1, act, d.sorted, d.block_expert, d.padded, nullptr, pairs, k, I, H,
                   al.max_blocks};
    MoeGemmArgs g2{act, dw2, pair_out, d.sorted, d.block_expert, d.padded, d.weights, pairs, k,
                   H, I, al.max_blocks};
    const auto run1 = [&] {
      cfg.gemm1(dim3(al.max_blocks, moe_gemm_grid_y(I, cfg.bn)), dim3(cfg.warps * 32),
                moe_gemm_smem_bytes(cfg.bm, cfg.bn, cfg.bk, cfg.stages, true), g1);
    };
    const auto run2 = [&] {
      cfg.gemm2(dim3(al.max_blocks, moe_gemm_grid_y(H, cfg.bn)), dim3(cfg.warps * 32),
                moe_gemm_smem_bytes(cfg.bm, cfg.bn, cfg.bk, cfg.stages, false), g2);
    };
    float ms[2];
    int i = 0;
    for (const std::function<void()>& run : {std::function<void()>(run1), std::function<void()>(run2)}) {
      for (int w = 0; w < 3; ++w) run();
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      const int reps = 20;
      CK(cudaEventRecord(e0));
      for (int w = 0; w < reps; ++w) run();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms[i], e0, e1));
      ms[i++] /= reps;
    }
    std::printf("time %s mixtral T=%d %s: gemm1 %.3f ms %.0f TFLOP/s | gemm2 %.3f ms %.0f TFLOP/s"
                " | both %.3f ms %.0f TFLOP/s\n",
                bf16 ? "bf16" : "fp16", Tn, cfg.name().c_str(), ms[0], flops1 / ms[0] * 1e-9,
                ms[1], flops2 / ms[1] * 1e-9, ms[0] + ms[1],
                (flops1 + flops2) / (ms[0] + ms[1]) * 1e-9);
    d.free();
    cudaFree(act), cudaFree(pair_out);
  }
  cudaFree(dx), cudaFree(dw1), cudaFree(dw2);
}

int main(int argc, char** argv) {
  bool check = argc == 1, time = argc == 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "check") check = true;
    if (std::string(argv[i]) == "time") time = true;
    if (std::string(argv[i]).rfind("only=", 0) == 0) only_config = std::atoi(argv[i] + 5);
  }
  if (check) {
    check_all<bf16>(true);
    check_all<fp16>(false);
    std::printf("check: %d failures\n", failures);
  }
  if (time) time_mixtral<bf16>(true);
  return failures ? 1 : 0;
}
