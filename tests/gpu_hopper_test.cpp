// Hopper warpgroup MMA and bulk copies on the GPU (sm_90 only; skipped with the reason elsewhere
// or without a GPU), compiled with NVRTC for sm_90a and launched through the driver:
// - a ring of bulk copies completing on mbarriers (common/mbarrier.cuh), copied bit for bit;
// - the wgmma tile kernel (tests/support/hopper_source.hpp): m64nNk16 x 4 from 128-byte-swizzled
//   shared memory for N = 64, 80, 128, 256 in both dtypes against a double product, exactly (small
//   integers: every product and sum is exact in fp32). A wrong descriptor, swizzle, k advance or
//   fragment layout moves values and fails here first;
// - moe_gemm_sm90_kernel against the double references of gpu_moe_gemm_test
//   (tests/support/moe_gemm_reference.hpp): E in {1, 8} with expert 0 receiving every token and
//   expert E - 1 none, T in {1, 3, 17, 100}, k in {1, 2}, H and I not multiples of any tile
//   (136, 200), then longer K (more k-tiles than ring slots); outputs poisoned with NaN, padding
//   rows of act must stay unwritten;
// - TMA (common/tma.cuh, tensor maps from runtime/core/tensor_map.hpp): 64 x 64 tiles of a
//   120 x 200 bf16 matrix whose rows lie 216 elements apart (the 16 columns between are filled
//   with a value that must never appear), the tile grid starting at column -5 and row -3 so
//   that tiles cross all four edges: loads checked element by element in the shared layout,
//   plain and 128-byte swizzled (wg::sw128_offset, the layout wgmma reads), with zeros past the
//   edges; stores from a shared tile in both layouts, clipped at the edges, every byte outside
//   the matrix (the gap columns, past the end) left as poisoned;
// - a warp-specialised TMA pipeline (common/warpgroup.cuh): a producer warp streaming the 44
//   tiles of a 700 x 200 matrix through 3 and 4 slots with full/empty mbarriers, two consumer
//   warpgroups after setmaxnreg each summing half of every tile and meeting on named barriers;
//   every tile sum and the total exact (small integers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "runtime/core/tensor_map.hpp"
#include "templates/common/tma.cuh"
#include "templates/common/wgmma.cuh"
#include "templates/moe/gemm_args.h"
#include "templates/moe/gemm_sm90_args.h"
#include "tests/support/hopper_source.hpp"
#include "tests/support/moe_gemm_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::MoeAlignment;
using test::MoeChecker;
using test::MoeTensor;
using test::MoeTestRouting;
using test::Sm90Tile;

const Sm90Tile kTiles[] = {
    {128, 128, 4, 0},  // two warpgroups, the t >= 1024 candidate
    {64, 64, 2, 0},    // one warpgroup, no wgmma group in flight across the barrier
    {64, 256, 3, 8},   // N = 256 (gemm2 only; gemm1 runs it with BLOCK_N 128), CTA order
    {128, 64, 6, 0},   // deep ring
};

template <typename X>
DeviceBuffer upload(const std::vector<X>& v) {
  DeviceBuffer b(v.size() * sizeof(X) + 16);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(b.get(), v.data(), v.size() * sizeof(X)));
  return b;
}

DeviceBuffer poisoned(std::size_t bytes) {
  DeviceBuffer b(bytes + 16);
  KTUNE_CU(Driver::get().cuMemsetD8Async(b.get(), 0xff, bytes + 16, nullptr));
  return b;
}

template <typename X>
std::vector<X> download(const DeviceBuffer& b, std::size_t n) {
  std::vector<X> v(n);
  KTUNE_CU(Driver::get().cuMemcpyDtoH(v.data(), b.get(), n * sizeof(X)));
  return v;
}

void* ptr(const DeviceBuffer& b) { return reinterpret_cast<void*>(b.get()); }

struct Kernel {
  Module module;
  CUfunction fn = nullptr;
};

class GpuHopper : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ensure_context(0);
    const DeviceInfo dev = query_device(0);
    if (dev.cc_major != 9 || dev.cc_minor != 0)
      GTEST_SKIP() << "wgmma needs sm_90a; device 0 is " << dev.name << " (sm_" << dev.cc_major
                   << dev.cc_minor << ")";
  }

  /// Compiles (cached per test binary) and loads one kernel from source text; raises its dynamic
  /// shared memory limit to `smem` bytes.
  CUfunction kernel(const std::string& source, const std::string& expr, unsigned smem) {
    static test::TempDir dir;
    static std::map<std::string, Kernel> loaded;
    auto it = loaded.find(expr);
    if (it == loaded.end()) {
      const Compiler compiler(dir.path());
      const CompiledKernel ck = compiler.compile({{"hopper", expr}, "sm_90a", source});
      Kernel k;
      k.module = Module(ck.cubin);
      k.fn = k.module.function(ck.lowered_name);
      it = loaded.emplace(expr, std::move(k)).first;
    }
    KTUNE_CU(Driver::get().cuFuncSetAttribute(
        it->second.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem)));
    return it->second.fn;
  }

  static void launch(CUfunction fn, unsigned gx, unsigned gy, unsigned threads, unsigned smem,
                     const void* args, std::size_t size) {
    CudaLauncher launcher(nullptr);
    KernelLaunch l;
    l.kernel = fn;
    l.grid[0] = gx, l.grid[1] = gy;
    l.block[0] = threads;
    l.shared_bytes = smem;
    l.args = args;
    l.args_size = size;
    launcher.launch(l);
  }

  void run_tile(bool bf16, int n, std::mt19937& rng) {
    // Integers in [-3, 3]: exact in both dtypes, |sum| <= 64 * 9.
    std::uniform_int_distribution<int> v(-3, 3);
    std::vector<std::uint16_t> a(64 * 64), b(static_cast<std::size_t>(n) * 64);
    std::vector<double> av(a.size()), bv(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      av[i] = v(rng);
      a[i] = test::moe_to_bits(bf16, av[i]);
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      bv[i] = v(rng);
      b[i] = test::moe_to_bits(bf16, bv[i]);
    }
    const DeviceBuffer da = upload(a), db = upload(b);
    const DeviceBuffer dd = poisoned(static_cast<std::size_t>(64) * n * 4);
    // ktune_test::WgmmaTileArgs
    struct {
      const void* a;
      const void* b;
      void* d;
    } args{ptr(da), ptr(db), ptr(dd)};
    const unsigned smem = static_cast<unsigned>((64 + n) * 128 + 1024);
    launch(kernel(test::wgmma_tile_source(), test::wgmma_tile_name(bf16, n), smem), 1, 1, 128,
           smem, &args, sizeof args);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::vector<float> d = download<float>(dd, static_cast<std::size_t>(64) * n);
    int wrong = 0;
    std::string first;
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < n; ++c) {
        double s = 0;
        for (int k = 0; k < 64; ++k) s += av[r * 64 + k] * bv[static_cast<std::size_t>(c) * 64 + k];
        const float got = d[static_cast<std::size_t>(r) * n + c];
        if (!(got == s) && wrong++ == 0)
          first = "(" + std::to_string(r) + ", " + std::to_string(c) + "): got " +
                  std::to_string(got) + " want " + std::to_string(s);
      }
    EXPECT_EQ(wrong, 0) << (bf16 ? "bf16" : "fp16") << " N=" << n << ": " << wrong
                        << " wrong of " << 64 * n << ", first " << first;
  }

  void run_case(bool bf16, const Sm90Tile& tile, int E, int T, int k, int H, int I,
                std::mt19937& rng) {
    // gemm1 holds gate and up accumulators: at most BLOCK_N 128 (the align kernel's block_m is
    // the tile's BLOCK_M for both GEMMs; BLOCK_N may differ).
    const Sm90Tile t1{tile.block_m, tile.block_n > 128 ? 128 : tile.block_n, tile.stages,
                      tile.group_m};
    const Sm90Tile& t2 = tile;
    ASSERT_EQ(moe_gemm_sm90_invalid_reason(t1.block_m, t1.block_n, 64, t1.stages, true,
                                           t1.group_m),
              nullptr);
    ASSERT_EQ(moe_gemm_sm90_invalid_reason(t2.block_m, t2.block_n, 64, t2.stages, false,
                                           t2.group_m),
              nullptr);
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
    const DeviceBuffer act = poisoned(rows * I * 2);
    const DeviceBuffer pair_out = poisoned(static_cast<std::size_t>(pairs) * H * 2);

    const int* sp = static_cast<const int*>(ptr(sorted));
    const int* be = static_cast<const int*>(ptr(blocks));
    const int* pr = static_cast<const int*>(ptr(padded));
    const MoeGemmArgs g1{ptr(dx), ptr(dw1), ptr(act), sp, be, pr, nullptr, pairs, k, I, H,
                         al.max_blocks, nullptr, nullptr, nullptr, nullptr};
    const MoeGemmArgs g2{ptr(act), ptr(dw2), ptr(pair_out), sp, be, pr,
                         static_cast<const float*>(ptr(weights)), pairs, k, H, I, al.max_blocks,
                         nullptr, nullptr, nullptr, nullptr};
    const std::string src = test::hopper_source("moe/gemm_sm90.cuh");
    const unsigned smem1 = moe_gemm_sm90_smem_bytes(t1.block_m, t1.block_n, 64, t1.stages, true);
    const unsigned smem2 = moe_gemm_sm90_smem_bytes(t2.block_m, t2.block_n, 64, t2.stages, false);
    launch(kernel(src, test::moe_gemm_sm90_name(bf16, t1, true), smem1),
           static_cast<unsigned>(al.max_blocks), moe_gemm_grid_y(I, t1.block_n),
           static_cast<unsigned>(moe_gemm_sm90_threads(t1.block_m)), smem1, &g1, sizeof g1);
    launch(kernel(src, test::moe_gemm_sm90_name(bf16, t2, false), smem2),
           static_cast<unsigned>(al.max_blocks), moe_gemm_grid_y(H, t2.block_n),
           static_cast<unsigned>(moe_gemm_sm90_threads(t2.block_m)), smem2, &g2, sizeof g2);
    KTUNE_CU(Driver::get().cuCtxSynchronize());

    const double u = test::moe_unit(bf16);
    const std::string tag = std::string(bf16 ? "bf16 " : "fp16 ") + tile.key() +
                            " E=" + std::to_string(E) + " T=" + std::to_string(T) +
                            " k=" + std::to_string(k) + " H=" + std::to_string(H) +
                            " I=" + std::to_string(I);

    // gemm1: act against the double reference; padding rows stay NaN (0xffff).
    std::vector<double> act_ref, mag;
    test::moe_gemm1_ref(r, al, x.val, w1.val, H, I, act_ref, mag);
    const std::vector<std::uint16_t> act_bits = download<std::uint16_t>(act, rows * I);
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

    // gemm2 from the kernel's act; every pair's row is written (NaN poison fails otherwise).
    std::vector<double> out_ref, mag2;
    test::moe_gemm2_ref(r, al, act_got, w2.val, H, I, out_ref, mag2);
    const std::vector<std::uint16_t> out_bits =
        download<std::uint16_t>(pair_out, static_cast<std::size_t>(pairs) * H);
    MoeChecker c2("gemm2 " + tag);
    for (std::size_t i = 0; i < out_bits.size(); ++i)
      c2(test::moe_from_bits(bf16, out_bits[i]), out_ref[i],
         1.25 * u * std::fabs(out_ref[i]) + 1e-5 * mag2[i] + 1e-6,
         "pair " + std::to_string(i / H) + " col " + std::to_string(i % H));
    EXPECT_EQ(c2.failed, 0) << c2.failed << " of " << c2.checked << "; " << c2.first;
  }
};

// The TMA tests' matrix: kMatRows x kMatCols bf16 elements, rows kMatPitch elements apart; tiles of
// kBox x kBox on a grid starting at (kFirstCol, kFirstRow), enough tiles to cover the matrix.
constexpr int kMatRows = 120, kMatCols = 200, kMatPitch = 216, kBox = 64;
// The innermost start coordinate stays a multiple of 16 bytes (8 bf16): on the H100 a box
// starting at column -5 raised an illegal instruction (compute-sanitizer: at the UTMALDG).
constexpr int kFirstCol = -8, kFirstRow = -3;
constexpr int kTilesX = (kMatCols - kFirstCol + kBox - 1) / kBox;  // 4
constexpr int kTilesY = (kMatRows - kFirstRow + kBox - 1) / kBox;  // 2
constexpr std::uint16_t kGap = 0xbeef;  // between a row's last column and the next row

/// The driver's encoding of `spec`, as the kernels' argument structs hold it.
tma::TensorMap encode(const TensorMapSpec& spec) {
  const CUtensorMap m = encode_tensor_map(spec);
  tma::TensorMap t;
  std::memcpy(&t, &m, sizeof t);
  return t;
}

/// Byte offset of element (r, c) of a shared kBox x kBox tile of 16-bit elements.
unsigned tile_offset(bool sw128, int r, int c) {
  return sw128 ? wg::sw128_offset(r, c / 8) + static_cast<unsigned>(c % 8) * 2
               : static_cast<unsigned>(r * kBox + c) * 2;
}

/// The TMA tests' matrix on the host: tma_test_value(r, c) at each element, kGap in the gaps.
std::vector<std::uint16_t> tma_test_matrix() {
  std::vector<std::uint16_t> host(static_cast<std::size_t>(kMatRows) * kMatPitch, kGap);
  for (int r = 0; r < kMatRows; ++r)
    for (int c = 0; c < kMatCols; ++c)
      host[static_cast<std::size_t>(r) * kMatPitch + c] = test::tma_test_value(r, c);
  return host;
}

// ktune_test::TmaTileArgs
struct TmaTileArgs {
  tma::TensorMap map;
  void* out;
  int first_col;
  int first_row;
};

// Loads of every tile, plain and 128-byte swizzled: each element of each shared tile is the
// matrix element at its global position, or 0 past an edge (before row or column 0 too); the
// gap columns never appear.
TEST_F(GpuHopper, TmaLoadTilesWithZerosPastTheEdges) {
  const DeviceBuffer src = upload(tma_test_matrix());
  const std::size_t tile_elems = kBox * kBox, tiles = kTilesX * kTilesY;
  const unsigned smem = static_cast<unsigned>(tile_elems * 2 + 1024);
  for (bool sw128 : {false, true}) {
    const DeviceBuffer out = poisoned(tiles * tile_elems * 2);
    const TmaTileArgs args{
        encode(matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, src.get(), kMatRows, kMatCols,
                                 kMatPitch * 2, kBox, kBox,
                                 sw128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE)),
        ptr(out), kFirstCol, kFirstRow};
    launch(kernel(test::tma_tile_source(), test::tma_load_tile_name(kBox, kBox), smem), kTilesX,
           kTilesY, 128, smem, &args, sizeof args);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::vector<std::uint16_t> got = download<std::uint16_t>(out, tiles * tile_elems);
    int wrong = 0;
    std::string first;
    for (int ty = 0; ty < kTilesY; ++ty)
      for (int tx = 0; tx < kTilesX; ++tx)
        for (int r = 0; r < kBox; ++r)
          for (int c = 0; c < kBox; ++c) {
            const int gr = kFirstRow + ty * kBox + r, gc = kFirstCol + tx * kBox + c;
            const bool inside = gr >= 0 && gr < kMatRows && gc >= 0 && gc < kMatCols;
            const std::uint16_t want = inside ? test::tma_test_value(gr, gc) : 0;
            const std::size_t at = (static_cast<std::size_t>(ty) * kTilesX + tx) * tile_elems +
                                   tile_offset(sw128, r, c) / 2;
            if (got[at] != want && wrong++ == 0)
              first = "tile (" + std::to_string(tx) + ", " + std::to_string(ty) + ") element (" +
                      std::to_string(r) + ", " + std::to_string(c) + "): got " +
                      std::to_string(got[at]) + " want " + std::to_string(want);
          }
    EXPECT_EQ(wrong, 0) << (sw128 ? "SWIZZLE_128B" : "SWIZZLE_NONE") << ": " << wrong
                        << " wrong of " << tiles * tile_elems << ", first " << first;
  }
}

// ktune_test::TmaMulticastArgs
struct TmaMulticastArgs {
  tma::TensorMap map;
  void* out;
  void* flags;
  int first_col;
  int first_row;
};

// A cluster of two CTAs per tile (common/cluster.cuh): each loads half of the tile's rows
// multicast into both; both hold the whole tile (the matrix elements at their positions, 0 past
// the edges), and each saw the other's remote arrival on its barrier. Launched through
// CudaLauncher with KernelLaunch::cluster = 2.
TEST_F(GpuHopper, TmaMulticastFillsBothCtasOfACluster) {
  const DeviceBuffer src = upload(tma_test_matrix());
  const std::size_t tile_elems = kBox * kBox;
  const unsigned ctas = 2 * kTilesX;
  const DeviceBuffer out = poisoned(ctas * tile_elems * 2);
  const DeviceBuffer flags = poisoned(ctas * 4);
  const TmaMulticastArgs args{
      encode(matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, src.get(), kMatRows, kMatCols,
                               kMatPitch * 2, kBox / 2, kBox, CU_TENSOR_MAP_SWIZZLE_NONE)),
      ptr(out), ptr(flags), kFirstCol, kFirstRow};
  const unsigned smem = static_cast<unsigned>(tile_elems * 2 + 1024);
  KernelLaunch l;
  l.kernel = kernel(test::tma_multicast_source(), test::tma_multicast_name(kBox), smem);
  l.grid[0] = ctas;
  l.block[0] = 128;
  l.shared_bytes = smem;
  l.args = &args;
  l.args_size = sizeof args;
  l.cluster = 2;
  CudaLauncher(nullptr).launch(l);
  KTUNE_CU(Driver::get().cuCtxSynchronize());
  const std::vector<std::uint16_t> got = download<std::uint16_t>(out, ctas * tile_elems);
  const std::vector<int> seen = download<int>(flags, ctas);
  int wrong = 0;
  std::string first;
  for (unsigned cta = 0; cta < ctas; ++cta) {
    EXPECT_EQ(seen[cta], 1) << "CTA " << cta << " never saw its peer's arrival";
    for (int r = 0; r < kBox; ++r)
      for (int c = 0; c < kBox; ++c) {
        const int gr = kFirstRow + r, gc = kFirstCol + static_cast<int>(cta / 2) * kBox + c;
        const bool inside = gr >= 0 && gr < kMatRows && gc >= 0 && gc < kMatCols;
        const std::uint16_t want = inside ? test::tma_test_value(gr, gc) : 0;
        if (got[cta * tile_elems + static_cast<std::size_t>(r) * kBox + c] != want && wrong++ == 0)
          first = "CTA " + std::to_string(cta) + " element (" + std::to_string(r) + ", " +
                  std::to_string(c) + ")";
      }
  }
  EXPECT_EQ(wrong, 0) << wrong << " wrong of " << ctas * tile_elems << ", first " << first;
}

// Stores of every tile from a shared tile, plain and 128-byte swizzled: each matrix element
// holds its value; the gap columns and the bytes past the matrix stay as poisoned (0xff). The
// tiles start at (0, 0) and are clipped at the right and bottom edges: on the H100 the same
// stores from (-8, -3), the loads' grid, faulted with an illegal instruction.
TEST_F(GpuHopper, TmaStoreTilesClippedAtTheEdges) {
  const std::size_t elems = static_cast<std::size_t>(kMatRows) * kMatPitch;
  const unsigned smem = static_cast<unsigned>(kBox * kBox * 2 + 1024);
  for (bool sw128 : {false, true}) {
    const DeviceBuffer dst = poisoned(elems * 2 + 64);
    const TmaTileArgs args{
        encode(matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dst.get(), kMatRows, kMatCols,
                                 kMatPitch * 2, kBox, kBox,
                                 sw128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE)),
        nullptr, 0, 0};
    launch(kernel(test::tma_tile_source(), test::tma_store_tile_name(kBox, kBox, sw128), smem),
           (kMatCols + kBox - 1) / kBox, (kMatRows + kBox - 1) / kBox, 128, smem, &args,
           sizeof args);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::vector<std::uint16_t> got = download<std::uint16_t>(dst, elems + 32);
    int wrong = 0;
    std::string first;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const int r = static_cast<int>(i / kMatPitch), c = static_cast<int>(i % kMatPitch);
      const std::uint16_t want =
          r < kMatRows && c < kMatCols ? test::tma_test_value(r, c) : std::uint16_t{0xffff};
      if (got[i] != want && wrong++ == 0)
        first = "row " + std::to_string(r) + " column " + std::to_string(c) + ": got " +
                std::to_string(got[i]) + " want " + std::to_string(want);
    }
    EXPECT_EQ(wrong, 0) << (sw128 ? "SWIZZLE_128B" : "SWIZZLE_NONE") << ": " << wrong
                        << " wrong of " << got.size() << ", first " << first;
  }
}

// The warp-specialised pipeline over a 700 x 200 matrix of integers in [-4, 4] (the gap
// columns hold 1000, which must not be summed): 11 x 4 tiles, the last column and row of tiles
// partly past the edges; every tile sum and the total exact, with 3 and 4 slots (each slot's
// barriers flip 11 to 15 times).
TEST_F(GpuHopper, TmaWarpSpecialisedPipelineIsExact) {
  constexpr int kPipeRows = 700;
  constexpr int tiles_x = (kMatCols + kBox - 1) / kBox, tiles_y = (kPipeRows + kBox - 1) / kBox;
  constexpr int tiles = tiles_x * tiles_y;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> v(-4, 4);
  std::vector<std::uint16_t> host(static_cast<std::size_t>(kPipeRows) * kMatPitch,
                                  test::moe_to_bits(true, 1000.0));
  std::vector<double> want(tiles, 0.0);
  double want_total = 0;
  for (int r = 0; r < kPipeRows; ++r)
    for (int c = 0; c < kMatCols; ++c) {
      const int x = v(rng);
      host[static_cast<std::size_t>(r) * kMatPitch + c] = test::moe_to_bits(true, x);
      want[(r / kBox) * tiles_x + c / kBox] += x;
      want_total += x;
    }
  const DeviceBuffer src = upload(host);
  // ktune_test::TmaPipelineArgs
  struct {
    tma::TensorMap map;
    void* tile_sums;
    void* total;
    int tiles_x;
    int tiles;
  } args{encode(matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, src.get(), kPipeRows, kMatCols,
                                  kMatPitch * 2, kBox, kBox)),
         nullptr, nullptr, tiles_x, tiles};
  for (int stages : {3, 4}) {
    const DeviceBuffer sums = poisoned(tiles * 4), total = poisoned(4);
    args.tile_sums = ptr(sums);
    args.total = ptr(total);
    const unsigned smem = test::tma_pipeline_smem(stages);
    launch(kernel(test::tma_pipeline_source(), test::tma_pipeline_name(stages), smem), 1, 1, 384,
           smem, &args, sizeof args);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::vector<float> got = download<float>(sums, tiles);
    int wrong = 0;
    std::string first;
    for (int t = 0; t < tiles; ++t)
      if (!(got[t] == want[t]) && wrong++ == 0)
        first = "tile " + std::to_string(t) + ": got " + std::to_string(got[t]) + " want " +
                std::to_string(want[t]);
    EXPECT_EQ(wrong, 0) << stages << " stages: " << wrong << " of " << tiles
                        << " tile sums wrong, first " << first;
    EXPECT_EQ(download<float>(total, 1)[0], want_total) << stages << " stages: total";
  }
}

// The mbarrier ring of bulk copies (common/mbarrier.cuh, in flash_decode's ring protocol):
// 77 rows (a short last tile) in tiles of 8 through 3 slots (10 tiles: every slot's barrier
// flips its phase three or four times), rows of 16, 256 and 512 bytes, copied bit for bit; the
// bytes past them in the output stay as poisoned.
TEST_F(GpuHopper, BulkCopyRingIsExact) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> byte(0, 255);
  constexpr int kRows = 77, kTileRows = 8, kStages = 3;
  for (int row_bytes : {16, 256, 512}) {
    const std::size_t n = static_cast<std::size_t>(kRows) * row_bytes;
    std::vector<unsigned char> src(n);
    for (unsigned char& c : src) c = static_cast<unsigned char>(byte(rng));
    const DeviceBuffer dsrc = upload(src);
    const DeviceBuffer ddst = poisoned(n + 64);
    struct {
      const void* src;
      void* dst;
      int rows;
      int row_bytes;
    } args{ptr(dsrc), ptr(ddst), kRows, row_bytes};
    const unsigned smem = static_cast<unsigned>(kStages * (kTileRows * row_bytes + 8));
    launch(kernel(test::bulk_ring_source(), test::bulk_ring_name(kTileRows, kStages), smem), 1,
           1, 128, smem, &args, sizeof args);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
    const std::vector<unsigned char> out = download<unsigned char>(ddst, n + 64);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += out[i] != src[i];
    EXPECT_EQ(wrong, 0u) << row_bytes << "-byte rows";
    for (std::size_t i = n; i < n + 64; ++i) EXPECT_EQ(out[i], 0xff) << "byte " << i;
  }
}

TEST_F(GpuHopper, WgmmaTileIsExact) {
  std::mt19937 rng(3);
  for (bool bf16 : {true, false})
    for (int n : {64, 80, 128, 256}) run_tile(bf16, n, rng);
}

TEST_F(GpuHopper, MoeGemmSm90MatchesTheDoubleReference) {
  for (bool bf16 : {true, false}) {
    std::mt19937 rng(bf16 ? 7 : 8);
    for (const Sm90Tile& tile : kTiles)
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

TEST_F(GpuHopper, MoeGemmSm90ManyKTiles) {
  // K = 520 and 1000: 9 and 16 k-tiles, more than any ring, the last partial; E = 8 with
  // expert 7 empty; 300 tokens give experts several blocks.
  std::mt19937 rng(9);
  for (const Sm90Tile& tile : kTiles) run_case(true, tile, 8, 300, 2, 520, 1000, rng);
}

}  // namespace
}  // namespace ktune
