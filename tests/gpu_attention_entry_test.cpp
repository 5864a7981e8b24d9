// ktune_attention on the GPU: the decode op it picks for short queries agrees with the prefill
// op, a paged cache (scattered pages, mixed lengths) agrees with the same keys contiguous, and a
// CUDA graph captured with the caller's workspace replays bit for bit. The kernels themselves
// are checked against the double reference in gpu_decode_test and gpu_attention_test; this
// test is about the entry point's routing, packing and workspace.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ktune/ktune.h"
#include "tests/support/moe_gemm_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

/// A device array of 16-bit values (or any T), freed at destruction.
template <typename T>
struct Device {
  T* p = nullptr;
  std::size_t n = 0;
  explicit Device(std::size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
  }
  Device(const std::vector<T>& v) : Device(v.size()) {
    EXPECT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  void poison() { EXPECT_EQ(cudaMemset(p, 0xff, n * sizeof(T)), cudaSuccess); }  // NaN bits
};

std::vector<std::uint16_t> random_bits(std::size_t n, std::mt19937& rng) {
  return test::MoeTensor(true, n, rng, -1.0, 1.0).bits;
}

double value(std::uint16_t b) { return test::moe_from_bits(true, b); }

/// |a - b| <= 2e-2 + 2e-2 |b| everywhere (two bf16 roundings of O of order 0.1-1), no NaN.
void expect_close(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < a.size() && bad < 5; ++i) {
    const double x = value(a[i]), y = value(b[i]);
    if (!(std::abs(x - y) <= 2e-2 + 2e-2 * std::abs(y))) {
      ADD_FAILURE() << what << ": element " << i << " is " << x << ", expected " << y;
      ++bad;
    }
  }
}

class GpuAttentionEntry : public ::testing::Test {
 protected:
  void SetUp() override {
    KTUNE_REQUIRE_GPU();
    ASSERT_EQ(ktune_configure((dir_.path() / "user.db").string().c_str(), 0), KTUNE_OK)
        << ktune_last_error();
  }
  void TearDown() override { ktune_configure(nullptr, 1); }

  static ktune_attention_args args(const void* q, const void* k, const void* v, void* o,
                                   int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk,
                                   int64_t d) {
    ktune_attention_args a;
    ktune_attention_args_init(&a);
    a.q = q, a.k = k, a.v = v, a.o = o;
    a.b = b, a.hq = hq, a.hkv = hkv, a.nq = nq, a.nk = nk, a.d = d;
    return a;
  }

  test::TempDir dir_;
};

TEST_F(GpuAttentionEntry, DecodeAgreesWithPrefill) {
  std::mt19937 rng(1);
  for (int nq : {1, 5}) {
    const int64_t b = 2, hq = 16, hkv = 4, nk = 1000, d = 128;
    const Device<std::uint16_t> q(random_bits(b * hq * nq * d, rng));
    const Device<std::uint16_t> k(random_bits(b * hkv * nk * d, rng));
    const Device<std::uint16_t> v(random_bits(b * hkv * nk * d, rng));
    Device<std::uint16_t> o_decode(b * hq * nq * d), o_prefill(b * hq * nq * d);
    Device<float> lse_decode(b * hq * nq), lse_prefill(b * hq * nq);
    o_decode.poison(), o_prefill.poison();
    ktune_attention_args a = args(q.p, k.p, v.p, o_decode.p, b, hq, hkv, nq, nk, d);
    a.causal = nq > 1;
    a.lse = lse_decode.p;
    ASSERT_EQ(ktune_attention(&a, nullptr), KTUNE_OK) << ktune_last_error();
    a.o = o_prefill.p, a.lse = lse_prefill.p, a.impl = KTUNE_ATTENTION_PREFILL;
    ASSERT_EQ(ktune_attention(&a, nullptr), KTUNE_OK) << ktune_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close(o_decode.get(), o_prefill.get(), "nq=" + std::to_string(nq));
    const std::vector<float> l1 = lse_decode.get(), l2 = lse_prefill.get();
    for (std::size_t i = 0; i < l1.size(); ++i)
      ASSERT_NEAR(l1[i], l2[i], 1e-3 * (1 + std::abs(l2[i]))) << "lse " << i;
  }
}

/// Contiguous K/V of `lens` sequences scattered into page pools through a shuffled block table.
struct PagedCache {
  int64_t b, hkv, nk, d, page, cols;
  std::vector<std::uint16_t> k, v;          // contiguous [b, hkv, nk, d]
  std::vector<std::uint16_t> k_pool, v_pool;  // [pages, page, hkv, d]
  std::vector<std::int32_t> table, lens;

  PagedCache(int64_t b_, int64_t hkv_, int64_t nk_, int64_t d_, int64_t page_,
             std::vector<std::int32_t> lens_, std::mt19937& rng)
      : b(b_), hkv(hkv_), nk(nk_), d(d_), page(page_), cols((nk_ + page_ - 1) / page_),
        lens(std::move(lens_)) {
    k = random_bits(b * hkv * nk * d, rng);
    v = random_bits(b * hkv * nk * d, rng);
    const int64_t pages = b * cols;
    std::vector<std::int32_t> perm(static_cast<std::size_t>(pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    table = perm;
    k_pool.assign(static_cast<std::size_t>(pages * page * hkv * d), 0);
    v_pool = k_pool;
    for (int64_t s = 0; s < b; ++s)
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t pg = table[static_cast<std::size_t>(s * cols + j / page)];
        for (int64_t h = 0; h < hkv; ++h)
          for (int64_t x = 0; x < d; ++x) {
            const auto src = static_cast<std::size_t>(((s * hkv + h) * nk + j) * d + x);
            const auto dst = static_cast<std::size_t>(((pg * page + j % page) * hkv + h) * d + x);
            k_pool[dst] = k[src];
            v_pool[dst] = v[src];
          }
      }
  }
};

// One query row goes to flash_decode, 200 (chunked prefill) to flash_attention: both read pages.
TEST_F(GpuAttentionEntry, PagedAgreesWithContiguous) {
  std::mt19937 rng(2);
  const std::pair<int64_t, int64_t> calls[] = {{1, 16}, {1, 256}, {200, 16}, {200, 256}};
  for (const auto& [nq, page] : calls) {
    const int64_t b = 3, hq = 8, hkv = 2, nk = 1000, d = 64;
    PagedCache c(b, hkv, nk, d, page, {1000, 37, 513}, rng);
    const Device<std::uint16_t> q(random_bits(b * hq * nq * d, rng));
    const Device<std::uint16_t> k(c.k), v(c.v), k_pool(c.k_pool), v_pool(c.v_pool);
    const Device<std::int32_t> table(c.table), lens(c.lens);
    Device<std::uint16_t> o_paged(b * hq * nq * d), o_contiguous(b * hq * nq * d);
    o_paged.poison(), o_contiguous.poison();
    ktune_attention_args a = args(q.p, k_pool.p, v_pool.p, o_paged.p, b, hq, hkv, nq, nk, d);
    a.page_size = page, a.block_table = table.p, a.seq_lens = lens.p;
    ASSERT_EQ(ktune_attention(&a, nullptr), KTUNE_OK) << ktune_last_error();
    // Each sequence on its own, contiguous, cut to its length (batch strides of the full arrays).
    for (int64_t s = 0; s < b; ++s) {
      const int64_t len = c.lens[static_cast<std::size_t>(s)];
      const int64_t strides[12] = {hq * nq * d,  nq * d, d, hkv * nk * d, nk * d, d,
                                   hkv * nk * d, nk * d, d, hq * nq * d,  nq * d, d};
      ktune_attention_args one =
          args(q.p + s * hq * nq * d, k.p + s * hkv * nk * d, v.p + s * hkv * nk * d,
               o_contiguous.p + s * hq * nq * d, 1, hq, hkv, nq, len, d);
      one.strides = strides;
      ASSERT_EQ(ktune_attention(&one, nullptr), KTUNE_OK) << ktune_last_error();
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close(o_paged.get(), o_contiguous.get(),
                 "nq=" + std::to_string(nq) + " page=" + std::to_string(page));
  }
}

TEST_F(GpuAttentionEntry, GraphWithCallerWorkspaceReplaysBitForBit) {
  std::mt19937 rng(3);
  const int64_t b = 2, hq = 32, hkv = 8, nq = 1, nk = 8000, d = 128, page = 16;
  PagedCache c(b, hkv, nk, d, page, {8000, 2999}, rng);
  const Device<std::uint16_t> q(random_bits(b * hq * nq * d, rng));
  const Device<std::uint16_t> k_pool(c.k_pool), v_pool(c.v_pool);
  const Device<std::int32_t> table(c.table), lens(c.lens);
  Device<std::uint16_t> o(b * hq * nq * d);
  ktune_attention_args a = args(q.p, k_pool.p, v_pool.p, o.p, b, hq, hkv, nq, nk, d);
  a.page_size = page, a.block_table = table.p, a.seq_lens = lens.p;
  size_t bytes = 0;
  ASSERT_EQ(ktune_attention_workspace_size(&a, &bytes), KTUNE_OK) << ktune_last_error();
  EXPECT_GT(bytes, 0u) << "a 2 x 8 head decode of 8000 keys should be split";
  Device<unsigned char> workspace(bytes);
  a.workspace = workspace.p, a.workspace_bytes = bytes;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const auto s = reinterpret_cast<ktune_stream>(stream);
  ASSERT_EQ(ktune_attention(&a, s), KTUNE_OK) << ktune_last_error();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<std::uint16_t> plain = o.get();

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const ktune_status status = ktune_attention(&a, s);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(status, KTUNE_OK) << ktune_last_error();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int r = 0; r < 2; ++r) {
    o.poison();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(o.get(), plain) << "replay " << r;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ktune
