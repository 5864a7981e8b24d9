// MoE grouped GEMMs and combine on the GPU, compiled with NVRTC and launched through the driver,
// against double references (tests/support/moe_gemm_reference.hpp): E in {1, 8}, T in
// {1, 3, 17, 100}, k in {1, 2}, H and I not multiples of any tile (136, 200), expert 0 receiving
// every token and expert E - 1 none, both dtypes, a few tile configurations. Routing and the
// alignment are built on the host (the align kernel is tested on its own). Outputs are poisoned
// with NaN; padding rows of act must stay unwritten. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "templates/moe/gemm_args.h"
#include "tests/support/moe_gemm_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::MoeAlignment;
using test::MoeChecker;
using test::MoeGemmTile;
using test::MoeTensor;
using test::MoeTestRouting;

const MoeGemmTile kTiles[] = {
    {64, 64, 64, 4, 2, 3},    // the default
    {16, 64, 64, 4, 1, 4},    // small T: one m16 fragment, warps side by side along N
    {128, 128, 32, 8, 2, 3},  // large tiles, rows of 4 chunks (other swizzle)
    {32, 32, 128, 2, 1, 2},   // long K step, two stages
    {16, 32, 256, 2, 1, 3},   // 256-element K step: rows of 32 chunks, 16 copy parts per slot
};

template <typename X>
DeviceBuffer upload(const std::vector<X>& v) {
  DeviceBuffer b(v.size() * sizeof(X) + 16);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(b.get(), v.data(), v.size() * sizeof(X)));
  return b;
}

DeviceBuffer poisoned(std::size_t elems16) {
  DeviceBuffer b(elems16 * 2 + 16);
  KTUNE_CU(Driver::get().cuMemsetD8Async(b.get(), 0xff, elems16 * 2 + 16, nullptr));
  return b;
}

std::vector<std::uint16_t> download16(const DeviceBuffer& b, std::size_t n) {
  std::vector<std::uint16_t> v(n);
  KTUNE_CU(Driver::get().cuMemcpyDtoH(v.data(), b.get(), n * 2));
  return v;
}

void* ptr(const DeviceBuffer& b) { return reinterpret_cast<void*>(b.get()); }

struct Kernel {
  Module module;
  CUfunction fn = nullptr;
};

class GpuMoeGemm : public ::testing::Test {
 protected:
  void SetUp() override { KTUNE_REQUIRE_GPU(); }

  /// Compiles (cached per test binary) and loads one kernel; raises its dynamic shared memory
  /// limit to `smem` bytes.
  CUfunction kernel(const std::string& file, const std::string& expr, unsigned smem) {
    static test::TempDir dir;
    static std::map<std::string, Kernel> loaded;
    auto it = loaded.find(expr);
    if (it == loaded.end()) {
      const Compiler compiler(dir.path());
      const CompiledKernel ck = compiler.compile({{file, expr}, query_device(0).arch(), {}});
      Kernel k;
      k.module = Module(ck.cubin);
      k.fn = k.module.function(ck.lowered_name);
      it = loaded.emplace(expr, std::move(k)).first;
    }
    // Raised whenever there is dynamic shared memory, not only above 48 KiB: the kernel's
    // static shared memory (12 x block_m bytes) counts against the default 48 KiB too, so a
    // 49152-byte ring would not launch.
    if (smem > 0)
      KTUNE_CU(Driver::get().cuFuncSetAttribute(
          it->second.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem)));
    return it->second.fn;
  }

  void run_case(bool bf16, const MoeGemmTile& tile, int E, int T, int k, int H, int I,
                std::mt19937& rng) {
    const MoeTestRouting r = test::moe_test_routing(T, E, k, rng);
    const MoeAlignment al = test::moe_align_host(r, tile.block_m);
    const int pairs = T * k;
    const MoeTensor x(bf16, static_cast<std::size_t>(T) * H, rng);
    const MoeTensor w1(bf16, static_cast<std::size_t>(E) * 2 * I * H, rng, -0.5, 0.5);
    const MoeTensor w2(bf16, static_cast<std::size_t>(E) * H * I, rng, -0.5, 0.5);
    const DeviceBuffer sorted = upload(al.sorted_pairs), blocks = upload(al.block_expert);
    const DeviceBuffer padded = upload(std::vector<int>{al.padded_rows});
    const DeviceBuffer weights = upload(r.weights);
    const DeviceBuffer dx = upload(x.bits), dw1 = upload(w1.bits), dw2 = upload(w2.bits);
    const std::size_t rows = al.sorted_pairs.size();
    const DeviceBuffer act = poisoned(rows * I);
    const DeviceBuffer pair_out = poisoned(static_cast<std::size_t>(pairs) * H);
    const DeviceBuffer y = poisoned(static_cast<std::size_t>(T) * H);

    const unsigned smem1 = tile.smem_bytes(true), smem2 = tile.smem_bytes(false);
    const int* sp = static_cast<const int*>(ptr(sorted));
    const int* be = static_cast<const int*>(ptr(blocks));
    const int* pr = static_cast<const int*>(ptr(padded));
    const MoeGemmArgs g1{ptr(dx), ptr(dw1), ptr(act), sp, be, pr, nullptr, pairs, k, I, H,
                         al.max_blocks, nullptr, nullptr, nullptr, nullptr};
    const MoeGemmArgs g2{ptr(act), ptr(dw2), ptr(pair_out), sp, be, pr,
                         static_cast<const float*>(ptr(weights)), pairs, k, H, I, al.max_blocks,
                         nullptr, nullptr, nullptr, nullptr};
    const MoeCombineArgs c{ptr(pair_out), ptr(y), T, k, H, 0};
    CudaLauncher launcher(nullptr);
    const auto launch = [&](CUfunction fn, unsigned gx, unsigned gy, unsigned threads,
                            unsigned smem, const void* args, std::size_t size) {
      KernelLaunch l;
      l.kernel = fn;
      l.grid[0] = gx, l.grid[1] = gy;
      l.block[0] = threads;
      l.shared_bytes = smem;
      l.args = args;
      l.args_size = size;
      launcher.launch(l);
    };
    launch(kernel("moe/gemm.cuh", test::moe_gemm_name(bf16, tile, true), smem1),
           static_cast<unsigned>(al.max_blocks), moe_gemm_grid_y(I, tile.block_n),
           static_cast<unsigned>(tile.warps * 32), smem1, &g1, sizeof g1);
    launch(kernel("moe/gemm.cuh", test::moe_gemm_name(bf16, tile, false), smem2),
           static_cast<unsigned>(al.max_blocks), moe_gemm_grid_y(H, tile.block_n),
           static_cast<unsigned>(tile.warps * 32), smem2, &g2, sizeof g2);
    launch(kernel("moe/combine.cuh", test::moe_combine_name(bf16, 128, 8), 0),
           static_cast<unsigned>(T), moe_combine_grid_y(H, 128, 8), 128, 0, &c, sizeof c);
    KTUNE_CU(Driver::get().cuCtxSynchronize());

    const double u = test::moe_unit(bf16);
    const std::string tag = std::string(bf16 ? "bf16 " : "fp16 ") + tile.key() +
                            " E=" + std::to_string(E) + " T=" + std::to_string(T) +
                            " k=" + std::to_string(k);

    // gemm1: act against the double reference; padding rows stay NaN.
    std::vector<double> act_ref, mag;
    test::moe_gemm1_ref(r, al, x.val, w1.val, H, I, act_ref, mag);
    const std::vector<std::uint16_t> act_bits = download16(act, rows * I);
    std::vector<double> act_got(act_bits.size());
    MoeChecker c1("gemm1 " + tag);
    for (std::size_t i = 0; i < act_bits.size(); ++i) {
      act_got[i] = test::moe_from_bits(bf16, act_bits[i]);
      const std::size_t row = i / I;
      if (static_cast<int>(row) >= al.padded_rows || al.sorted_pairs[row] >= pairs) {
        if (act_bits[i] != 0xffff) c1(0.0, 1.0, 0.0, "padding row " + std::to_string(row));
        continue;
      }
      c1(act_got[i], act_ref[i], 2 * u * std::fabs(act_ref[i]) + 1e-5 * mag[i] + 1e-6,
         "row " + std::to_string(row) + " col " + std::to_string(i % I));
    }
    EXPECT_EQ(c1.failed, 0) << c1.failed << " of " << c1.checked << "; " << c1.first;

    // gemm2 from the kernel's act.
    std::vector<double> out_ref, mag2;
    test::moe_gemm2_ref(r, al, act_got, w2.val, H, I, out_ref, mag2);
    const std::vector<std::uint16_t> out_bits =
        download16(pair_out, static_cast<std::size_t>(pairs) * H);
    std::vector<double> out_got(out_bits.size());
    MoeChecker c2("gemm2 " + tag);
    for (std::size_t i = 0; i < out_bits.size(); ++i) {
      out_got[i] = test::moe_from_bits(bf16, out_bits[i]);
      c2(out_got[i], out_ref[i], 1.25 * u * std::fabs(out_ref[i]) + 1e-5 * mag2[i] + 1e-6,
         "pair " + std::to_string(i / H) + " col " + std::to_string(i % H));
    }
    EXPECT_EQ(c2.failed, 0) << c2.failed << " of " << c2.checked << "; " << c2.first;

    // combine: the slot-order sum of the kernel's pair_out.
    const std::vector<std::uint16_t> y_bits = download16(y, static_cast<std::size_t>(T) * H);
    MoeChecker c3("combine " + tag);
    for (int t = 0; t < T; ++t)
      for (int col = 0; col < H; ++col) {
        double s = 0, m = 0;
        for (int j = 0; j < k; ++j) {
          const double v = out_got[(static_cast<std::size_t>(t) * k + j) * H + col];
          s += v;
          m += std::fabs(v);
        }
        c3(test::moe_from_bits(bf16, y_bits[static_cast<std::size_t>(t) * H + col]), s,
           1.25 * u * std::fabs(s) + 1e-6 * m + 1e-7, "token " + std::to_string(t));
      }
    EXPECT_EQ(c3.failed, 0) << c3.failed << " of " << c3.checked << "; " << c3.first;
  }
};

TEST_F(GpuMoeGemm, MatchesTheDoubleReference) {
  ensure_context(0);
  for (bool bf16 : {true, false}) {
    std::mt19937 rng(bf16 ? 7 : 8);
    for (const MoeGemmTile& tile : kTiles)
      for (int E : {1, 8})
        for (int T : {1, 3, 17, 100})
          for (int k : {1, 2}) {
            if (k > E) continue;
            SCOPED_TRACE(tile.key() + " E=" + std::to_string(E) + " T=" + std::to_string(T) +
                         " k=" + std::to_string(k));
            run_case(bf16, tile, E, T, k, 136, 200, rng);
          }
  }
}

TEST_F(GpuMoeGemm, TileMultiplesAndManyKSteps) {
  ensure_context(0);
  std::mt19937 rng(9);
  for (const MoeGemmTile& tile : kTiles) run_case(true, tile, 8, 100, 2, 256, 512, rng);
}

}  // namespace
}  // namespace ktune
