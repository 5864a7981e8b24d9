// The flash_decode op's host side: problems and reasons, the space and its invalid reasons,
// defaults (the split count from the device, the regimes' tiles and merges), the workspace,
// launches through a recording launcher, a double-precision model of the split-KV partition and
// both merges (warps inside a CTA, then splits) against plain softmax attention, and NVRTC
// compiles for sm_80 and sm_90a. Paged KV: decode_paged_test.cpp; mask variants:
// decode_variants_test.cpp; variable-length batches: decode_varlen_test.cpp.
#include "tests/decode_test_support.hpp"
#include "tests/support/decode_points.hpp"

namespace ktune {
namespace {

using namespace decode_test;

// ---- problems ----

TEST(DecodeProblem, KeysRoundTripAndBadProblemsSayWhy) {
  const Problem p = op().parse_problem("d=64,nk=1000,nq=5,hkv=2,hq=16,b=3,causal=yes");
  EXPECT_EQ(p.values, (std::vector<std::int64_t>{3, 16, 2, 5, 1000, 64, 1, 0, 0, 0, 0, 0}));
  // page 0, the variants and varlen off are left out
  EXPECT_EQ(op().problem_key(p), "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(p)), p);
  EXPECT_EQ(op().problem_key(op().default_problem()),
            "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no");
  EXPECT_EQ(op().name(), "flash_decode");
  EXPECT_EQ(op().family(), "decode");
  EXPECT_EQ(find_op("flash_decode"), &op());
  EXPECT_EQ(op().layout_size(), 12u);
  // nq defaults to 1 (decode) and stays in the key.
  EXPECT_EQ(op().problem_key(op().parse_problem("b=2,hq=8,hkv=2,nk=300,d=64")),
            "b=2,hq=8,hkv=2,nq=1,nk=300,d=64,causal=no");

  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=84"),
                       "d=84 is not a multiple of 8 (rows of 16-byte chunks; 8 to 256)"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=3,nq=1,nk=1,d=64"),
                       "hq=8 is not a multiple of hkv=3"));
  EXPECT_TRUE(contains(problem_error("b=4096,hq=32,hkv=8,nq=1,nk=1,d=64"),
                       "b=4096 x hq=32 = 131072 (batch, head) pairs; at most 65535"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=257,nk=1,d=64"),
                       "nq=257 is out of range (allowed 1..256)"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=0,nk=1,d=64"), "nq=0 is out of range"));
  EXPECT_EQ(problem_error("b=1,hq=65535,hkv=1,nq=256,nk=1073741824,d=256,causal=yes"), "");
  // Decode (nq <= 16) and longer query blocks are separate regimes for the lookup.
  const DimSpec& nq = op().dims()[3];
  EXPECT_EQ(nq.regime(16), 0);
  EXPECT_EQ(nq.regime(17), 1);
  EXPECT_TRUE(op().dims()[5].matched_exactly());
}

// ---- the space ----

TEST(DecodeSpace, InvalidPointsCarryTheirReason) {
  const Problem p = op().parse_problem(kBar1);
  const Space h100(op(), p, DType::bf16, device("sm_90a"));
  EXPECT_EQ(h100.points().size(), 14u * 3 * 3 * 3 * 3 * 2 * 2 * 2);  // ... kv_split, tma
  EXPECT_GT(h100.valid_count(), 0u);
  std::size_t counted = 0;
  for (const auto& [reason, n] : h100.invalid_reasons()) {
    EXPECT_FALSE(reason.empty());
    counted += n;
  }
  EXPECT_EQ(counted, h100.points().size() - h100.valid_count());
  // At d=128 and 4 packed rows only block_m=16 is valid, with the (block_n, warps) pairs of
  // whole 16-key slices: (32, 2), (64, 2), (64, 4), (128, 2), (128, 4), (128, 8); the split
  // counts that leave no split empty; every ring depth but 4 stages of 128 keys (276 KiB); and
  // each of those again merged in a cluster (merge=1) at 2, 4, 8 and 16 splits; kv_split=1
  // nowhere (d=96's tiles only); every one of them with tma=0 and tma=1 (its 1056 bytes more
  // keep 3 stages of 128 keys within 227 KiB).
  std::size_t expected = 0;
  for (std::int64_t splits : op().tunables()[0].values)
    for (int bn : {32, 64, 128})
      for (int w : {2, 4, 8})
        if (bn % (16 * w) == 0 && flash_decode_used_splits(4096, bn, static_cast<int>(splits)) ==
                                      splits) {
          const std::size_t rings = bn == 128 ? 2 : 3;
          expected += rings;
          if (splits == 2 || splits == 4 || splits == 8 || splits == 16) expected += rings;
        }
  EXPECT_EQ(h100.valid_count(), 2 * expected);
  // tma=1: contiguous fixed-length K/V at d = 64, 128 or 256's tiles, on sm_90.
  const std::string tma = "splits=2,block_m=16,block_n=64,warps=4,stages=3,tma=1";
  EXPECT_EQ(why(tma, kBar1), "");
  EXPECT_EQ(why(tma, kPagedBar),
            "tma=1 with page=16: tensor maps read contiguous, fixed-length K/V only");
  EXPECT_EQ(why(tma, "b=2,hq=8,hkv=2,nq=1,nk=1000,d=128,varlen=yes"),
            "tma=1 with varlen=yes: tensor maps read contiguous, fixed-length K/V only");
  EXPECT_TRUE(contains(why(tma, "b=2,hq=8,hkv=2,nq=1,nk=1000,d=80"),
                       "tma=1 is for d = 64, 128 and 256's tiles, not d=96's"));
  EXPECT_EQ(why(tma, "b=2,hq=8,hkv=2,nq=1,nk=1000,d=32"),
            "tma=1 is for d = 64, 128 and 256's tiles, not d=32's");
  EXPECT_EQ(why(tma, kBar1, "sm_80"),
            "tma=1 needs the tensor memory accelerator (compute capability 9.0 or later; this "
            "device has 8.0)");

  EXPECT_EQ(why("splits=2,block_m=16,block_n=64,warps=4,stages=3", kBar1), "");
  EXPECT_EQ(why("splits=2,block_m=16,block_n=32,warps=4,stages=3", kBar1),
            "block_n=32 / warps=4 = 8 keys per warp (each warp takes whole 16-key slices)");
  EXPECT_EQ(why("splits=2,block_m=64,block_n=64,warps=4,stages=3",
                "b=1,hq=64,hkv=1,nq=1,nk=4096,d=128"),
            "block_m=64 at d=128 with 16 keys per warp: 288 fp32 accumulators of O and S per "
            "thread (at most 144; ptxas spills above)");
  EXPECT_EQ(why("splits=2,block_m=32,block_n=128,warps=2,stages=2",
                "b=1,hq=64,hkv=1,nq=1,nk=4096,d=128"),
            "block_m=32 at d=128 with 64 keys per warp: 192 fp32 accumulators of O and S per "
            "thread (at most 144; ptxas spills above)");
  EXPECT_EQ(why("splits=2,block_m=32,block_n=64,warps=4,stages=3", kBar1),
            "block_m=32 for 4 packed rows (4 heads per group x nq=1): half the tile or more "
            "would be padding; block_m=16 reads the same K/V");
  EXPECT_EQ(why("splits=2,block_m=32,block_n=64,warps=4,stages=3",
                "b=1,hq=32,hkv=8,nq=5,nk=4096,d=128"),
            "");  // 20 packed rows
  EXPECT_EQ(why("splits=8,block_m=16,block_n=64,warps=4,stages=2",
                "b=1,hq=8,hkv=8,nq=1,nk=600,d=128"),
            "splits=8 over 10 key tiles of block_n=64 (nk=600): 3 splits would be empty");
  EXPECT_EQ(why("splits=2,block_m=16,block_n=64,warps=4,stages=2",
                "b=1,hq=8,hkv=8,nq=1,nk=64,d=128"),
            "splits=2 over 1 key tiles of block_n=64 (nk=64): 1 splits would be empty");
  EXPECT_EQ(why("splits=1,block_m=16,block_n=64,warps=4,stages=2",
                "b=1,hq=8,hkv=8,nq=1,nk=1,d=128"),
            "");
  // d=256, 128-key tiles, 4 stages: 530 KiB anywhere; 3 stages of 64 keys (16 a warp: swizzled
  // 512-byte K/V rows, Q's padded to 528): 200 KiB, H100 only.
  EXPECT_TRUE(contains(why("splits=1,block_m=16,block_n=128,warps=4,stages=4",
                           "b=1,hq=8,hkv=8,nq=1,nk=4096,d=256"),
                       "more than the 227 KiB any GPU gives a block"));
  const std::string d256 = "b=1,hq=8,hkv=8,nq=1,nk=4096,d=256";
  EXPECT_EQ(why("splits=1,block_m=16,block_n=64,warps=4,stages=3", d256), "");
  EXPECT_EQ(why("splits=1,block_m=16,block_n=64,warps=4,stages=3", d256, "sm_80"),
            "block_m=16, block_n=64, stages=3 at d=256 need 205056 bytes of shared memory (Q "
            "tile + 3 K and V tiles), more than the device's 166912 per block");
  // Values outside the lists, other dtypes, old GPUs.
  Params q = op().parse_params("splits=2,block_m=16,block_n=64,warps=4,stages=3");
  q.values[0] = 5;
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, device("sm_90a")),
            "splits=5 is not one of 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128");
  q.values[0] = 2;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::f32, device("sm_90a")).value_or(""),
                       "is not supported by flash_decode (dtypes: bf16, fp16)"));
  DeviceInfo turing = device("sm_80");
  turing.cc_major = 7;
  turing.cc_minor = 5;
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, turing),
            "needs compute capability 8.0 or later (cp.async, bf16 mma.sync); the device is 7.5");
  EXPECT_TRUE(contains(run_error([&] {
                         op().kernels(op().parse_params(
                                          "splits=2,block_m=16,block_n=32,warps=4,stages=3"),
                                      p, DType::bf16);
                       }),
                       "flash_decode: block_n=32 / warps=4"));
}

TEST(DecodeSpace, ValidPointsPassTheKernelsOwnChecks) {
  for (std::int64_t d : {32, 64, 96, 128, 256})
    for (const char* dims : {"b=2,hq=32,hkv=8,nq=1,nk=4096", "b=1,hq=16,hkv=1,nq=33,nk=1000"})
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d));
        const Space s(op(), p, DType::f16, device(arch));
        EXPECT_GT(s.valid_count(), 0u) << d << " " << arch;
        for (const Params& params : s.valid_points()) {
          const auto v = params.values;
          EXPECT_EQ(flash_decode_invalid_reason(static_cast<int>(d), static_cast<int>(v[1]),
                                                static_cast<int>(v[2]), static_cast<int>(v[3]),
                                                static_cast<int>(v[4])),
                    nullptr)
              << op().params_key(params);
          EXPECT_LE(op().dynamic_shared_bytes(params, p, DType::f16, 0),
                    static_cast<unsigned>(device(arch).smem_optin_per_block));
          EXPECT_EQ(flash_decode_used_splits(p.values[4], static_cast<int>(v[2]),
                                             static_cast<int>(v[0])),
                    v[0]);
        }
      }
}

// ---- defaults ----

TEST(DecodeDefaults, ValidForEveryShapeDtypeAndArch) {
  DeviceInfo small = device("sm_80");  // an sm_86-like part: 99 KiB per block, 84 SMs
  small.cc_minor = 6;
  small.sm_count = 84;
  small.smem_optin_per_block = 99 * 1024;
  small.smem_per_sm = 100 * 1024;
  DeviceInfo unknown = device("sm_90a");
  unknown.sm_count = 0;
  unknown.smem_per_sm = 0;
  const std::vector<DeviceInfo> devices{device("sm_80"), device("sm_90a"), small, unknown};
  for (const DeviceInfo& dev : devices)
    for (DType t : {DType::bf16, DType::f16})
      for (std::int64_t d : {32, 40, 64, 72, 80, 88, 96, 112, 128, 200, 256})
        for (const char* dims :
             {"b=1,hq=1,hkv=1,nq=1,nk=1", "b=16,hq=32,hkv=8,nq=1,nk=4096",
              "b=1,hq=64,hkv=8,nq=1,nk=32768", "b=3,hq=16,hkv=1,nq=33,nk=4099",
              "b=1,hq=8,hkv=8,nq=256,nk=17", "b=64,hq=8,hkv=1,nq=5,nk=1000",
              "b=1,hq=1,hkv=1,nq=1,nk=1073741824", "b=2047,hq=32,hkv=32,nq=2,nk=300",
              "b=64,hq=32,hkv=8,nq=1,nk=8000,page=16", "b=3,hq=16,hkv=1,nq=33,nk=4099,page=256",
              "b=5,hq=8,hkv=8,nq=1,nk=17,page=32"})
          for (const char* causal : {"no", "yes"}) {
            const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                                 ",causal=" + causal);
            const Params params = op().default_params(p, t, dev);
            EXPECT_EQ(op().invalid_reason(params, p, t, dev), std::nullopt)
                << dev.name << " " << dtype_name(t) << " " << op().problem_key(p) << ": "
                << op().params_key(params);
          }
}

// The points gpu_decode_test's paged test runs (test::paged_test_points) are valid on both
// architectures: a point the op refuses otherwise fails only on a GPU, as stop 73's `tma` made
// the kv_split point of d=80 and d=96 one (it was set by position) until stop 75's GPU run.
TEST(DecodeSpace, PagedGpuTestPointsAreValid) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (std::int64_t page : {16, 256})
      for (DType t : {DType::bf16, DType::f16})
        for (std::int64_t d : test::paged_test_head_dims())
          for (const char* dims : test::paged_test_dims())
            for (bool causal : {false, true}) {
              const Problem p = op().parse_problem(
                  std::string(dims) + ",d=" + std::to_string(d) + ",page=" +
                  std::to_string(page) + (causal ? ",causal=yes" : ""));
              const std::vector<Params> points = test::paged_test_points(op(), p, t, dev, d);
              ASSERT_GE(points.size(), 2u) << arch << " " << op().problem_key(p);
              for (const Params& params : points)
                EXPECT_EQ(op().invalid_reason(params, p, t, dev), std::nullopt)
                    << arch << " " << op().problem_key(p) << " " << op().params_key(params);
            }
  }
}

// The same for GpuDecode's cluster-merge and tma tests on sm_90a: each merged counterpart of a
// valid combine point is valid and at least 10 pairs compare per case; the tma test finds three
// other tiles and every point it runs is valid with tma=0 and with tma=1.
TEST(DecodeSpace, ClusterAndTmaGpuTestPointsAreValid) {
  const DeviceInfo dev = device("sm_90a");
  const std::size_t tma = op().param_index("tma");
  for (std::int64_t d : test::suite_head_dims())
    for (DType t : {DType::bf16, DType::f16}) {
      std::size_t pairs = 0;
      for (const char* dims : test::cluster_test_dims()) {
        const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d));
        for (const auto& [combine, merged] : test::cluster_test_pairs(op(), p, t, dev)) {
          EXPECT_EQ(op().invalid_reason(merged, p, t, dev), std::nullopt)
              << op().problem_key(p) << " " << op().params_key(merged);
          ++pairs;
        }
      }
      EXPECT_GE(pairs, 10u) << "d=" << d;
      const Problem one = op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=1000,d=" + std::to_string(d));
      Params probe = op().default_params(one, t, dev);
      probe.values[tma] = 1;
      if (op().invalid_reason(probe, one, t, dev))
        continue;  // the test skips such head dims (tensor maps need d=64, 128 or 256's tiles)
      for (const char* dims : test::tma_test_dims()) {
        const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d));
        const std::vector<Params> points = test::tma_test_points(op(), p, t, dev);
        ASSERT_GE(points.size(), 4u) << op().problem_key(p) << ": fewer than 3 other tiles";
        for (Params params : points)
          for (std::int64_t copied : {0, 1}) {
            params.values[tma] = copied;
            EXPECT_EQ(op().invalid_reason(params, p, t, dev), std::nullopt)
                << op().problem_key(p) << " " << op().params_key(params);
          }
      }
    }
}

TEST(DecodeDefaults, SplitsFillTheDevice) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = [&](const std::string& problem, const DeviceInfo& dev) {
    return op().params_key(op().default_params(op().parse_problem(problem), DType::bf16, dev));
  };
  // One CTA per SM (measured best on the H100): 128 (batch, KV head) CTAs fill 132 SMs
  // unsplit; 8 take 16 splits of 2048 keys.
  EXPECT_EQ(key(kBar1, h100), "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key(kBar2, h100), "splits=16,block_m=16,block_n=64,warps=4,stages=3");
  // Short caches are not split below 256 keys a split; a full grid is not split at all.
  EXPECT_EQ(key("b=1,hq=8,hkv=8,nq=1,nk=1000,d=128", h100),
            "splits=3,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=64,hq=32,hkv=8,nq=1,nk=8192,d=128", h100),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  // d=64, one row tile, contiguous K/V, more than 16 (batch, KV head) pairs on sm_90: the row's
  // tiles in 8, 4 or 2 splits merged in a cluster, the most within 3 CTAs per SM (32 pairs x 8,
  // 96 x 4, 128 x 2, 17 x 8); not 16 pairs or fewer, paged K/V, a 128-key window or sm_80.
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=16384,d=64", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=12,hq=32,hkv=8,nq=1,nk=5000,d=64", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=16,hq=32,hkv=8,nq=1,nk=2000,d=64", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=17,hq=8,hkv=1,nq=1,nk=9000,d=64", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=16384,d=64", device("sm_80")),
            "splits=3,block_m=16,block_n=128,warps=4,stages=2");
  // ... and at 16 pairs or fewer, up to 4 CTAs per SM of the row's tiles, unmerged (the unsplit
  // grid under 3/4 of the SMs: 16 pairs x 32 splits; 8 x 64); paged, split to balance lengths.
  EXPECT_EQ(key("b=2,hq=64,hkv=8,nq=1,nk=20000,d=64", h100),
            "splits=32,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=1,hq=64,hkv=8,nq=1,nk=65536,d=64", h100),
            "splits=64,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=16384,d=64,page=16", h100).find("merge"),
            std::string::npos);
  // MQA: 16 x 1 rows; 128 splits of 256 keys.
  EXPECT_EQ(key("b=1,hq=16,hkv=1,nq=1,nk=32768,d=128", h100),
            "splits=128,block_m=16,block_n=64,warps=4,stages=3");
  // Several query rows per head (here 64 packed rows): 16-row tiles and up to 3 CTAs per SM as
  // shared memory allows (4 row tiles x 8 KV heads x 8 splits; 12 would leave one empty);
  // over 64 packed rows the largest tile the accumulators allow, 2 CTAs per SM at d=128; from
  // 64 packed rows on sm_90 the K/V tiles come by tensor maps (TmaFromManyPackedRows).
  EXPECT_EQ(key("b=1,hq=32,hkv=8,nq=16,nk=4096,d=64", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,tma=1");
  EXPECT_EQ(key("b=2,hq=48,hkv=4,nq=12,nk=5000,d=128,causal=yes", h100),
            "splits=6,block_m=32,block_n=64,warps=4,stages=3,tma=1");
  // d > 64, at most 16 packed rows, where one CTA per SM would leave a tenth of the SMs idle
  // (48 pairs x 2 splits, 72 x 1, 80 x 1, 112 x 1 on 132 SMs): the few-pairs tiles, two stages
  // (d=256: 32-key tiles of 2 warps), up to 4 CTAs per SM as shared memory allows (3 here).
  EXPECT_EQ(key("b=6,hq=32,hkv=8,nq=4,nk=2200,d=128,causal=yes", h100),
            "splits=6,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=9,hq=32,hkv=8,nq=1,nk=8192,d=128", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=14,hq=32,hkv=8,nq=1,nk=6000,d=128", h100),
            "splits=3,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=10,hq=16,hkv=8,nq=1,nk=4096,d=256", h100),
            "splits=4,block_m=16,block_n=32,warps=2,stages=2,tma=1");
  EXPECT_EQ(key("b=12,hq=32,hkv=8,nq=1,nk=5000,d=96", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=2");
  // ... but not where one CTA per SM fills nine tenths of them (120 pairs, kBar1's 128), nor
  // where more CTAs per SM would not add any (8 pairs of 1000 keys: 3 splits of 256 either
  // way), nor on sm_80.
  EXPECT_EQ(key("b=15,hq=32,hkv=8,nq=1,nk=6000,d=128", h100),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=9,hq=32,hkv=8,nq=1,nk=8192,d=128", device("sm_80")),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
  // On a device whose memory feeds each SM 30 GB/s or more (the H200: 4.8 TB/s over 132 SMs),
  // one CTA a pair in a wave of 70-100 % of the SMs takes 128-key tiles of 8 warps, unsplit, at
  // d=64 and 128 (96-128 pairs here); not 92 pairs, nor d=96, nor a 128-key window, nor paged
  // K/V, nor the H100 (25 GB/s per SM) or a device whose bandwidth is unknown (0).
  DeviceInfo h200 = h100;
  h200.memory_bandwidth = 4'800'000'000'000;
  DeviceInfo h100_sxm = h100;
  h100_sxm.memory_bandwidth = 3'352'320'000'000;
  for (const char* problem : {"b=12,hq=32,hkv=8,nq=1,nk=4096,d=128", "b=16,hq=64,hkv=8,nq=1,nk=4096,d=64",
                              "b=32,hq=32,hkv=4,nq=1,nk=4000,d=128", "b=12,hq=32,hkv=8,nq=1,nk=5000,d=64"}) {
    EXPECT_EQ(key(problem, h200), "splits=1,block_m=16,block_n=128,warps=8,stages=3") << problem;
    ModelSwitch rules_only("0");  // the cost model serves the H100 SXM (decode_cost_model_test)
    EXPECT_EQ(key(problem, h100_sxm), key(problem, h100)) << problem;
  }
  EXPECT_EQ(key("b=23,hq=32,hkv=4,nq=1,nk=4000,d=128", h200),
            "splits=4,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=12,hq=32,hkv=8,nq=1,nk=5000,d=96", h200),
            "splits=4,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=16,hq=64,hkv=8,nq=1,nk=4096,d=64,window=128", h200),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=12,hq=32,hkv=8,nq=1,nk=4096,d=128,page=16", h200),
            key("b=12,hq=32,hkv=8,nq=1,nk=4096,d=128,page=16", h100));
  {
    ModelSwitch rules_only("0");  // the rules' answer; the cost model's is its own test's
    EXPECT_EQ(key(kBar1, h100_sxm), "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  }
  // d=32, one row tile, contiguous K/V on sm_90: 64-key tiles of 2 warps, up to 7 CTAs per SM,
  // the splits merged in a cluster of 2-16 (72 pairs: 12 splits would fit, 8 merge; 128 pairs of
  // 2000 keys x 4, no split under 256 keys; 56 x 16; 160 x 4); 16 pairs take 32 splits, more
  // than a cluster holds, with the combine; 8 pairs of 60000 keys 32 splits (48 and 64 would
  // leave one empty), 2 CTAs per SM, so 4 stages for 48 KiB in flight per SM. Where they would
  // not split (800 pairs), paged, or on sm_80: the row's tiles.
  for (const DeviceInfo& dev : {h100, h200}) {
    EXPECT_EQ(key("b=9,hq=32,hkv=8,nq=1,nk=3500,d=32", dev),
              "splits=8,block_m=16,block_n=64,warps=2,stages=2,merge=1");
    EXPECT_EQ(key("b=16,hq=64,hkv=8,nq=1,nk=2000,d=32", dev),
              "splits=4,block_m=16,block_n=64,warps=2,stages=2,merge=1");
    EXPECT_EQ(key("b=14,hq=16,hkv=4,nq=1,nk=8000,d=32", dev),
              "splits=16,block_m=16,block_n=64,warps=2,stages=2,merge=1");
    EXPECT_EQ(key("b=40,hq=16,hkv=4,nq=1,nk=5000,d=32", dev),
              "splits=4,block_m=16,block_n=64,warps=2,stages=2,merge=1");
    EXPECT_EQ(key("b=2,hq=32,hkv=8,nq=1,nk=16000,d=32", dev),
              "splits=32,block_m=16,block_n=64,warps=2,stages=2");
    EXPECT_EQ(key("b=1,hq=32,hkv=8,nq=1,nk=60000,d=32", dev),
              "splits=32,block_m=16,block_n=64,warps=2,stages=4");
    EXPECT_EQ(key("b=100,hq=32,hkv=8,nq=1,nk=1000,d=32", dev),
              "splits=1,block_m=16,block_n=128,warps=4,stages=3");
  }
  EXPECT_EQ(key("b=9,hq=32,hkv=8,nq=1,nk=3500,d=32,page=16", h200).find("merge"),
            std::string::npos);
  EXPECT_EQ(key("b=9,hq=32,hkv=8,nq=1,nk=3500,d=32", device("sm_80")).find("merge"),
            std::string::npos);
  // Elsewhere the defaults keep the combine kernel (merge=0) past 2 splits: clusters win only
  // when the GPU holds all of them at once, which the defaults cannot tell
  // (benchmarks/decode/NOTES.md); two splits merge (TwoSplitsOfTheRowsTilesMergeInACluster), and
  // so do medium spans over few pairs (MediumSpansOverFewPairsMergeTheRowsTiles).
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=9000,d=128", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=4096,d=128", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  // A grid under half a wave (8 (batch, KV head) pairs, one 32-row tile, 6 splits: 48 CTAs)
  // takes 16-row tiles and splits of 128 keys or more: 2 x 8 x 8 = 128 CTAs.
  EXPECT_EQ(key("b=4,hq=16,hkv=2,nq=4,nk=2000,d=128,causal=yes", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,tma=1");
  // A100: one stage fewer, 108 SMs: 8 x 12.
  EXPECT_EQ(key(kBar2, device("sm_80")), "splits=12,block_m=16,block_n=64,warps=4,stages=2");
  // Paged: pieces of at most 1024 keys of nk even when the grid is full (mixed lengths), and a
  // short cache is not split further than the contiguous rule says.
  EXPECT_EQ(key(kPagedBar, h100), "splits=6,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=64,hq=32,hkv=8,nq=1,nk=8192,d=128,page=16", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=1,hq=64,hkv=8,nq=1,nk=32768,d=128,page=256", h100),
            "splits=32,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=64,hq=32,hkv=8,nq=1,nk=1000,d=128,page=16", h100),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  // d=256 on a part with 99 KiB per block falls back to the smallest tiles.
  DeviceInfo small = device("sm_80");
  small.smem_optin_per_block = 99 * 1024;
  EXPECT_EQ(key("b=1,hq=8,hkv=8,nq=1,nk=512,d=256", small),
            "splits=2,block_m=16,block_n=32,warps=2,stages=2");
}

// tma=1 (sm_90) from 64 packed rows where it is valid (contiguous, fixed-length, d = 64, 128 or
// 256's tiles); below, and on sm_80, tma=0 (benchmarks/decode/NOTES.md, stop 73).
TEST(DecodeDefaults, TmaFromManyPackedRows) {
  const DeviceInfo h100 = device("sm_90a"), a100 = device("sm_80");
  const auto tma = [](const std::string& problem, const DeviceInfo& dev) {
    return op().parse_params(op().params_key(checked_default(problem, dev))).values[7];
  };
  EXPECT_EQ(tma("b=1,hq=32,hkv=8,nq=16,nk=10000,d=128,causal=yes", h100), 1);  // 64 rows
  EXPECT_EQ(tma("b=2,hq=16,hkv=2,nq=8,nk=6000,d=256,causal=yes", h100), 1);    // 64
  EXPECT_EQ(tma("b=1,hq=28,hkv=4,nq=10,nk=12000,d=112", h100), 1);              // 70, 128's tiles
  EXPECT_EQ(tma("b=1,hq=64,hkv=8,nq=16,nk=30000,d=64,window=2048,alibi=yes", h100), 1);
  EXPECT_EQ(tma("b=2,hq=32,hkv=8,nq=8,nk=8000,d=128,causal=yes", h100), 1);     // 32 rows
  EXPECT_EQ(tma("b=1,hq=17,hkv=1,nq=1,nk=9000,d=64", h100), 1);                 // 17 rows
  EXPECT_EQ(tma("b=2,hq=48,hkv=4,nq=5,nk=4000,d=112,causal=yes", h100), 1);     // 60
  // One row tile (at most 16 rows) keeps cp.async outside d=256's tiles.
  EXPECT_EQ(tma("b=2,hq=32,hkv=8,nq=4,nk=8000,d=128,causal=yes", h100), 0);     // 16 rows
  EXPECT_EQ(tma("b=1,hq=64,hkv=8,nq=1,nk=32768,d=128", h100), 0);               // decode
  EXPECT_EQ(tma("b=1,hq=32,hkv=8,nq=16,nk=10000,d=128,causal=yes", a100), 0);   // sm_80
  EXPECT_EQ(tma("b=1,hq=32,hkv=8,nq=16,nk=10000,d=96", h100), 0);   // d=96's tiles
  // d=256's tiles at any row count (d=200 runs in them), the few-pairs tiles too; not on sm_80.
  EXPECT_EQ(tma("b=4,hq=32,hkv=2,nq=1,nk=8000,d=256", h100), 1);              // 16 rows
  EXPECT_EQ(tma("b=2,hq=8,hkv=2,nq=6,nk=7000,d=200,causal=yes", h100), 1);    // 24
  EXPECT_EQ(tma("b=8,hq=32,hkv=8,nq=2,nk=3000,d=256", h100), 1);              // 8
  EXPECT_EQ(tma("b=32,hq=4,hkv=1,nq=1,nk=2000,d=256", h100), 1);              // 4
  EXPECT_EQ(tma("b=1,hq=16,hkv=16,nq=1,nk=9000,d=256", h100), 1);             // 1
  EXPECT_EQ(tma("b=4,hq=32,hkv=2,nq=1,nk=8000,d=256", a100), 0);
  EXPECT_EQ(tma("b=1,hq=32,hkv=8,nq=16,nk=10000,d=32", h100), 0);   // d=32's
  EXPECT_EQ(tma("b=4,hq=32,hkv=8,nq=16,nk=8000,d=128,page=16", h100), 0);      // paged
  EXPECT_EQ(tma("b=4,hq=32,hkv=8,nq=16,nk=8000,d=128,varlen=yes", h100), 0);   // varlen
  EXPECT_EQ(tma("b=4,hq=32,hkv=8,nq=1,nk=8000,d=256,page=16", h100), 0);        // paged d=256
  EXPECT_EQ(tma("b=4,hq=32,hkv=8,nq=1,nk=8000,d=256,varlen=yes", h100), 0);     // varlen d=256
}

TEST(DecodeDefaults, HeadDimsBelow96TakeTwoCtasPerSmAndD80D96SplitTheirRows) {
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_EQ(h100.sm_count, 132);
  const auto key = default_key;
  const std::string pairs64 = "b=8,hq=32,hkv=8,nq=1,nk=8192";  // 64 (batch, KV head) pairs
  EXPECT_EQ(key(pairs64 + ",d=72", h100), "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key(pairs64 + ",d=80", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=3,kv_split=1");
  EXPECT_EQ(key(pairs64 + ",d=88", h100), "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  // (2 splits merged in a cluster: TwoSplitsOfTheRowsTilesMergeInACluster.)
  EXPECT_EQ(key(pairs64 + ",d=96", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1,kv_split=1");
  EXPECT_EQ(key(pairs64 + ",d=128", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  // 256 pairs: one split either way; a window splits what it reaches (2048 keys over 32 pairs:
  // the short-span rule's merged 32-key tiles, ShortSpansOverFewPairsMergeSmallTiles; at 64
  // pairs the row's tiles).
  EXPECT_EQ(key("b=8,hq=32,hkv=32,nq=1,nk=3000,d=80", h100),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3,kv_split=1");
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=12000,d=80,window=2048", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=3,kv_split=1");
  // Not: paged or varlen K/V (their own split rule), 32 packed rows (two row tiles' worth of
  // the multi-row rule), the few-pairs tiles (96 pairs: two stages), sm_80.
  for (const char* tail : {",d=80,page=16", ",d=80,varlen=yes"})
    EXPECT_EQ(key(pairs64 + tail, h100).find("kv_split"), std::string::npos) << tail;
  EXPECT_EQ(key("b=8,hq=64,hkv=8,nq=4,nk=8192,d=80", h100).find("kv_split"), std::string::npos);
  EXPECT_EQ(key("b=12,hq=32,hkv=8,nq=1,nk=5000,d=80", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key(pairs64 + ",d=80", device("sm_80")),  // 108 SMs: one split
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
}

// Unsplit grids of many pairs at d = 32-128's tiles (contiguous, one row tile, sm_90):
// two stages where they fit the grid in fewer waves (three stages: 2 CTAs per SM, 264 slots;
// two: 3 (d=128) or 4 (d=96) per SM). 384 and 352 pairs: one wave instead of two; 256 pairs
// fit one wave at three stages, 512 pairs of d=128 take two waves either way; paged keeps three.
TEST(DecodeDefaults, ManyPairsTakeAStageFewerWhereThatSavesAWave) {
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_EQ(h100.sm_count, 132);
  const auto key = [&](const std::string& problem) {
    return op().params_key(checked_default(problem, h100));
  };
  EXPECT_EQ(key("b=12,hq=32,hkv=32,nq=1,nk=2000,d=80"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2,kv_split=1");
  EXPECT_EQ(key("b=12,hq=32,hkv=32,nq=1,nk=2000,d=128"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=11,hq=32,hkv=32,nq=1,nk=4000,d=128"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=8,hq=32,hkv=32,nq=1,nk=3000,d=128"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=16,hq=32,hkv=32,nq=1,nk=3000,d=128"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_NE(key("b=12,hq=32,hkv=32,nq=1,nk=2000,d=128,page=16").find("stages=3"),
            std::string::npos);
  // d=64's and d=32's row tiles: 4 CTAs per SM at three stages (528 slots), 6 at two (792).
  // 600-640 pairs (d=48 on d=64's tiles too): one wave instead of two; 384 and 500 pairs fit one
  // wave at three stages, 1000 pairs take two either way.
  EXPECT_EQ(key("b=20,hq=32,hkv=32,nq=1,nk=2000,d=64"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=40,hq=16,hkv=16,nq=1,nk=3000,d=48"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=2");
  EXPECT_EQ(key("b=75,hq=32,hkv=8,nq=1,nk=1500,d=32"),
            "splits=1,block_m=16,block_n=128,warps=4,stages=2");
  EXPECT_EQ(key("b=12,hq=32,hkv=32,nq=1,nk=3000,d=64"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=125,hq=32,hkv=4,nq=1,nk=3000,d=32"),
            "splits=1,block_m=16,block_n=128,warps=4,stages=3");
  EXPECT_EQ(key("b=125,hq=8,hkv=8,nq=1,nk=1000,d=64"),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
}

// Short spans over few pairs at d=96's and d=128's tiles (contiguous, one row tile, sm_90):
// 16-48 pairs, at most 4096 keys in reach: 32-key tiles of 2 warps, 2 stages, the most of 16,
// 8, 4, 2 merged splits of >= 80 keys with none empty (kv_split at d = 80/96), at most 128K
// (pair, key) products; not paged or varlen, not on sm_80, not at several query rows or d=256.
// With a mask variant (window, soft-capping, ALiBi) over 32 pairs or more: at most 8 splits, 3
// stages.
TEST(DecodeDefaults, ShortSpansOverFewPairsMergeSmallTiles) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = default_key;
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=1500,d=128", h100),
            "splits=16,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=1,nk=3000,d=128", h100),
            "splits=16,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  // The same 32 pairs with a variant: 8 splits at three stages; 16 and 24 pairs keep 16 at two.
  for (const char* variant : {"nk=20000,d=128,window=3000", "nk=3000,d=128,softcap=yes",
                              "nk=3000,d=128,alibi=yes"})
    EXPECT_EQ(key(std::string("b=2,hq=16,hkv=16,nq=1,") + variant, h100),
              "splits=8,block_m=16,block_n=32,warps=2,stages=3,merge=1")
        << variant;
  EXPECT_EQ(key("b=1,hq=16,hkv=16,nq=1,nk=50000,d=128,window=3500", h100),
            "splits=16,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  EXPECT_EQ(key("b=6,hq=32,hkv=4,nq=1,nk=7000,d=128,window=3000", h100),
            "splits=16,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=12000,d=80,window=2048", h100),
            "splits=8,block_m=16,block_n=32,warps=2,stages=3,merge=1,kv_split=1");
  // 1024 keys in reach: 64 per split at 16, so 8 (at three stages: a window over 48 pairs).
  EXPECT_EQ(key("b=6,hq=32,hkv=8,nq=1,nk=16000,d=128,window=1024", h100),
            "splits=8,block_m=16,block_n=32,warps=2,stages=3,merge=1");
  // 1400 keys: 44 tiles leave the 16th split empty, so 8.
  EXPECT_EQ(key("b=2,hq=32,hkv=8,nq=1,nk=1400,d=128", h100),
            "splits=8,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=4,nq=1,nk=1200,d=72", h100),
            "splits=8,block_m=16,block_n=32,warps=2,stages=2,merge=1");
  // Measured at one query row only: four (causal) keep the row's tiles.
  EXPECT_EQ(key("b=6,hq=32,hkv=8,nq=4,nk=2200,d=128,causal=yes", h100).find("merge=1"),
            std::string::npos);
  // Not: 64 pairs, 6000 keys, 48 pairs x 3500 keys (past 128K products), paged, varlen, d=256.
  for (const char* outside : {"b=8,hq=32,hkv=8,nq=1,nk=3000,d=128",
                              "b=2,hq=32,hkv=8,nq=1,nk=6000,d=128",
                              "b=24,hq=16,hkv=2,nq=1,nk=3500,d=128",
                              "b=4,hq=32,hkv=8,nq=1,nk=1500,d=128,page=16",
                              "b=4,hq=32,hkv=8,nq=1,nk=1500,d=128,varlen=yes",
                              "b=4,hq=32,hkv=8,nq=1,nk=1500,d=256"})
    EXPECT_EQ(key(outside, h100).find("block_n=32,warps=2,stages=2,merge=1"), std::string::npos)
        << outside;
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=1500,d=128", device("sm_80")).find("merge=1"),
            std::string::npos);
}

// Medium spans over few pairs at d=96's and d=128's tiles (one query row, contiguous, sm_90, no
// mask variant), past short_spans: 16-40 pairs, 2048-8000 keys in reach: the row's 64-key tiles
// in 16 merged splits where 16 per pair stay within 2 CTAs per SM, else 8; two stages, three
// under 1.5 CTAs per SM; kv_split at d = 80/96. Not past 8000 keys or 40 pairs, not at several
// query rows, with a variant, paged, at d=256 or on sm_80.
TEST(DecodeDefaults, MediumSpansOverFewPairsMergeTheRowsTiles) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = default_key;
  EXPECT_EQ(key("b=2,hq=32,hkv=8,nq=1,nk=5000,d=128", h100),  // 16 pairs: 256 CTAs
            "splits=16,block_m=16,block_n=64,warps=4,stages=2,merge=1");
  EXPECT_EQ(key("b=1,hq=16,hkv=16,nq=1,nk=7000,d=128", h100),
            "splits=16,block_m=16,block_n=64,warps=4,stages=2,merge=1");
  EXPECT_EQ(key("b=3,hq=32,hkv=8,nq=1,nk=6500,d=96", h100),  // 24 x 8: 1.45 CTAs per SM
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1,kv_split=1");
  EXPECT_EQ(key("b=6,hq=32,hkv=4,nq=1,nk=5500,d=112", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=8000,d=128", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=2,merge=1");
  EXPECT_EQ(key("b=5,hq=64,hkv=8,nq=1,nk=7500,d=96", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=2,merge=1,kv_split=1");
  // 40 pairs of 4000 keys: past short_spans' 128K products, so here.
  EXPECT_EQ(key("b=20,hq=16,hkv=2,nq=1,nk=4000,d=128", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=2,merge=1");
  for (const char* outside : {"b=2,hq=32,hkv=16,nq=1,nk=9000,d=80",
                              "b=6,hq=32,hkv=8,nq=1,nk=8000,d=128",
                              "b=3,hq=32,hkv=4,nq=1,nk=6000,d=128",
                              "b=4,hq=32,hkv=8,nq=4,nk=8000,d=128",
                              "b=4,hq=32,hkv=8,nq=1,nk=8000,d=128,window=6000",
                              "b=4,hq=32,hkv=8,nq=1,nk=8000,d=128,page=16",
                              // d=256 (rule B merges it only up to 800 keys a split)
                              "b=2,hq=32,hkv=8,nq=1,nk=16000,d=256"})
    EXPECT_EQ(key(outside, h100).find("merge=1"), std::string::npos) << outside;
  EXPECT_EQ(key("b=2,hq=32,hkv=8,nq=1,nk=5000,d=128", device("sm_80")).find("merge=1"),
            std::string::npos);
}

// Two splits of the row's tiles at d=96's and d=128's tiles (contiguous, one row tile, sm_90)
// merge in a cluster; not at 4 splits, not paged or varlen, not on sm_80 (no clusters), not at
// d=64's tiles (their own merged rule) nor d=256's.
TEST(DecodeDefaults, TwoSplitsOfTheRowsTilesMergeInACluster) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = default_key;
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=128", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=32,hq=32,hkv=4,nq=1,nk=2500,d=80", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1,kv_split=1");
  EXPECT_EQ(key("b=10,hq=48,hkv=6,nq=1,nk=4000,d=112", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=9000,d=128", h100),  // 4 splits: the combine
            "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=256", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,tma=1");
  for (const char* outside : {"b=8,hq=32,hkv=8,nq=1,nk=5000,d=128,page=16",
                              "b=8,hq=32,hkv=8,nq=1,nk=5000,d=128,varlen=yes"})
    EXPECT_EQ(key(outside, h100).find("merge=1"), std::string::npos) << outside;
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=128", device("sm_80")).find("merge=1"),
            std::string::npos);
}

// Several packed rows over few pairs (at most 8 row tiles of 16 rows, tile head dims 64 and
// 128, contiguous, no mask variant, sm_90): 128-key tiles of 4 warps at 3 stages in merged
// splits, 16 where at most 7 clusters of 16 are asked, else 8 or 4 within one CTA per SM
// (merged_defaults.cpp, stop 78). Past 8 row tiles, one row tile, d=256, paged, a window or
// sm_80: not this rule.
TEST(DecodeDefaults, FewRowTilesOfManyRowsMergeWideTiles) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = default_key;
  // 71 rows over one pair: 5 row tiles, 16 merged splits.
  EXPECT_EQ(key("b=1,hq=71,hkv=1,nq=1,nk=12000,d=64", h100),
            "splits=16,block_m=16,block_n=128,warps=4,stages=3,merge=1,tma=1");
  // 28 rows over 4 pairs: 8 row tiles, more than 7 clusters of 16: 8 splits.
  EXPECT_EQ(key("b=1,hq=28,hkv=4,nq=4,nk=30000,d=128", h100),
            "splits=8,block_m=16,block_n=128,warps=4,stages=3,merge=1,tma=1");
  // d=112 runs in d=128's tiles; 900 keys are 8 tiles of 128: 8 splits, not 16.
  EXPECT_EQ(key("b=1,hq=48,hkv=2,nq=1,nk=900,d=112,causal=yes", h100),
            "splits=8,block_m=16,block_n=128,warps=4,stages=3,merge=1,tma=1");
  for (const char* outside : {
           "b=9,hq=32,hkv=1,nq=1,nk=9000,d=64",              // 18 row tiles
           "b=2,hq=32,hkv=8,nq=1,nk=9000,d=128",             // 4 rows: one row tile
           "b=1,hq=64,hkv=2,nq=1,nk=9000,d=256",             // d=256's tiles
           "b=1,hq=64,hkv=2,nq=1,nk=9000,d=96",              // d=96's tiles
           "b=1,hq=64,hkv=2,nq=1,nk=9000,d=128,page=16",     // paged
           "b=1,hq=64,hkv=2,nq=1,nk=9000,d=128,window=4096", // a mask variant
           "b=1,hq=64,hkv=2,nq=1,nk=300,d=128"})             // 3 key tiles: no 4 splits
    EXPECT_EQ(key(outside, h100).find("block_n=128,warps=4,stages=3,merge=1"), std::string::npos)
        << outside;
  EXPECT_EQ(key("b=1,hq=71,hkv=1,nq=1,nk=12000,d=64", device("sm_80")).find("merge=1"),
            std::string::npos);
}

// Short spans of several packed rows (at least 16 rows, at most 640 keys in reach, tile head
// dims 64 and 128, contiguous, no mask variant, sm_90): one split of 128-key tiles, 4 warps,
// 2 stages, tma=1 (decode_defaults.cpp, rule C, stop 78). Fewer rows, longer spans, d=256,
// paged, a window or sm_80: not this rule.
TEST(DecodeDefaults, ShortSpansOfManyRowsTakeOneSplitOfWideTiles) {
  const DeviceInfo h100 = device("sm_90a");
  for (const char* inside : {"b=1,hq=32,hkv=8,nq=4,nk=300,d=128,causal=yes",  // 16 rows
                             "b=2,hq=28,hkv=4,nq=3,nk=520,d=128",              // 21
                             "b=16,hq=64,hkv=1,nq=1,nk=640,d=64",              // 64, 640 keys
                             "b=2,hq=40,hkv=8,nq=8,nk=400,d=112,causal=yes"})  // d=128's tiles
    EXPECT_EQ(default_key(inside, h100),
              "splits=1,block_m=16,block_n=128,warps=4,stages=2,tma=1")
        << inside;
  for (const char* outside : {"b=1,hq=64,hkv=8,nq=1,nk=300,d=128",             // 8 rows
                              "b=1,hq=32,hkv=8,nq=4,nk=641,d=128,causal=yes",  // 641 keys
                              "b=1,hq=32,hkv=8,nq=4,nk=300,d=256,causal=yes",  // d=256
                              "b=1,hq=32,hkv=8,nq=4,nk=300,d=96,causal=yes",   // d=96's tiles
                              "b=1,hq=32,hkv=8,nq=4,nk=300,d=128,page=16",     // paged
                              "b=1,hq=32,hkv=8,nq=4,nk=300,d=128,softcap=yes"})
    EXPECT_NE(default_key(outside, h100), "splits=1,block_m=16,block_n=128,warps=4,stages=2,tma=1")
        << outside;
  EXPECT_EQ(default_key("b=2,hq=28,hkv=4,nq=3,nk=520,d=128", device("sm_80")).find("tma=1"),
            std::string::npos);
}

// d=256's tiles over few pairs (one row tile, at most 16 pairs, contiguous, no mask variant,
// sm_90): 64-key tiles of 2 warps, 3 stages, tma=1, in merged splits (16 where at most 7
// clusters of 16 are asked, else 8, 4 or 2) of at most 800 keys each (merged_defaults.cpp,
// rule B, stop 78). Longer splits, more pairs, several row tiles, paged or sm_80: not this rule.
TEST(DecodeDefaults, D256OverFewPairsMergesTwoWarpTiles) {
  const DeviceInfo h100 = device("sm_90a");
  EXPECT_EQ(default_key("b=2,hq=8,hkv=1,nq=1,nk=7000,d=256", h100),  // 2 pairs: 16 of 437 keys
            "splits=16,block_m=16,block_n=64,warps=2,stages=3,merge=1,tma=1");
  EXPECT_EQ(default_key("b=6,hq=8,hkv=2,nq=2,nk=5000,d=256,causal=yes", h100),  // 12 pairs: 8
            "splits=8,block_m=16,block_n=64,warps=2,stages=3,merge=1,tma=1");
  EXPECT_EQ(default_key("b=1,hq=32,hkv=16,nq=1,nk=637,d=200", h100),  // 10 tiles: 4 splits
            "splits=4,block_m=16,block_n=64,warps=2,stages=3,merge=1,tma=1");
  for (const char* outside : {"b=1,hq=16,hkv=2,nq=1,nk=20000,d=256",   // 1250 keys a split
                              "b=32,hq=4,hkv=1,nq=1,nk=1000,d=256",     // 32 pairs
                              "b=1,hq=32,hkv=1,nq=1,nk=5000,d=256",     // 2 row tiles
                              "b=2,hq=8,hkv=1,nq=1,nk=7000,d=256,page=16",
                              "b=2,hq=8,hkv=1,nq=1,nk=7000,d=256,alibi=yes"})
    EXPECT_EQ(default_key(outside, h100).find("warps=2,stages=3,merge=1"), std::string::npos)
        << outside;
  EXPECT_EQ(default_key("b=2,hq=8,hkv=1,nq=1,nk=7000,d=256", device("sm_80")).find("merge=1"),
            std::string::npos);
}

// ---- workspace and launches ----

TEST(DecodeWorkspace, HoldsEveryPartialTheKernelsAddress) {
  for (const char* dims : {kBar1, kBar2, "b=3,hq=16,hkv=1,nq=33,nk=4099,d=64,causal=yes",
                           "b=1,hq=8,hkv=2,nq=256,nk=5000,d=256"}) {
    const Problem p = op().parse_problem(dims);
    const Space s(op(), p, DType::bf16, device("sm_90a"));
    for (const Params& params : s.valid_points()) {
      const std::int64_t splits = params.values[0];
      const std::size_t bytes = op().workspace_bytes(params, p, DType::bf16);
      if (splits == 1 || params.values[5] == 1) {  // one split, or merged in a cluster
        EXPECT_EQ(bytes, 0u) << op().params_key(params);
        continue;
      }
      // tma=1 shares the workspace of its tma=0 twin; its launch encodes tensor maps, which
      // needs the driver (launch_limits_test runs those launches over the stub driver).
      if (params.values[7] == 1) {
        Params twin = params;
        twin.values[7] = 0;
        EXPECT_EQ(bytes, op().workspace_bytes(twin, p, DType::bf16)) << op().params_key(params);
        continue;
      }
      const RecordingLauncher<FlashDecodeArgs> l = run(params, p, 0x100000);
      const FlashDecodeArgs& a = l.args[0];
      const std::uint64_t base = 0x100000;
      const std::int64_t plane = p.values[0] * p.values[1] * p.values[3];
      // Last float of part_o and of part_lse, as the kernels index them.
      const std::uint64_t o_end = reinterpret_cast<std::uintptr_t>(a.part_o) +
                                  4 * static_cast<std::uint64_t>(splits * plane * p.values[5]);
      const std::uint64_t lse_end =
          reinterpret_cast<std::uintptr_t>(a.part_lse) + 4 * static_cast<std::uint64_t>(splits * plane);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.part_o), base);
      EXPECT_LE(o_end, reinterpret_cast<std::uintptr_t>(a.part_lse));
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.part_lse) % 16, 0u);
      EXPECT_EQ(lse_end, base + bytes) << op().params_key(params);
    }
  }
  // The bar's second shape at 32 splits: 32 x 64 rows x (128 + 1) floats.
  const Problem p = op().parse_problem(kBar2);
  EXPECT_EQ(op().workspace_bytes(op().parse_params("splits=32,block_m=16,block_n=64,warps=4,"
                                                   "stages=3"),
                                 p, DType::bf16),
            32u * 64 * 129 * 4);
}

TEST(DecodeRun, SplitsKernelThenCombine) {
  const Problem p = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].file, "decode/flash_decode.cuh");
  EXPECT_EQ(ks[0].name_expression, "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true>");
  EXPECT_EQ(ks[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 64>");

  const RecordingLauncher<FlashDecodeArgs> l = run(params, p);
  ASSERT_EQ(l.launches.size(), 2u);
  const KernelLaunch& split = l.launches[0];
  EXPECT_EQ(split.kernel, reinterpret_cast<KernelHandle>(0x100));
  EXPECT_EQ(split.grid[0], 2u);  // 8 heads per group x 5 rows = 40 packed rows, tiles of 32
  EXPECT_EQ(split.grid[1], 3u);  // splits
  EXPECT_EQ(split.grid[2], 6u);  // b * hkv
  EXPECT_EQ(split.block[0], 64u);
  EXPECT_EQ(static_cast<int>(split.block[0]), op().block_threads(params, p, DType::f16, 0));
  EXPECT_EQ(split.shared_bytes, op().dynamic_shared_bytes(params, p, DType::f16, 0));
  // Q (rows padded to 144 bytes) + 4 stages of K and V (d=64: unpadded swizzled rows of 128).
  EXPECT_EQ(split.shared_bytes, 32u * 144 + 4 * 2 * 64 * 128);
  const KernelLaunch& combine = l.launches[1];
  EXPECT_EQ(combine.kernel, reinterpret_cast<KernelHandle>(0x200));
  EXPECT_EQ(combine.grid[0], (3u * 16 * 5 + 3) / 4);  // one warp per output row
  EXPECT_EQ(combine.grid[1], 1u);
  EXPECT_EQ(combine.block[0], 128u);
  EXPECT_EQ(combine.shared_bytes, 0u);
  // The combine may start during the split kernel's tail (it waits in griddep_wait()); the split
  // kernel follows whatever came before it on the stream in full.
  EXPECT_TRUE(combine.programmatic);
  EXPECT_FALSE(split.programmatic);
  EXPECT_EQ(op().block_threads(params, p, DType::f16, 1), 128);
  EXPECT_EQ(op().dynamic_shared_bytes(params, p, DType::f16, 1), 0u);

  const FlashDecodeArgs& a = l.args[0];
  EXPECT_EQ(a.q, reinterpret_cast<const void*>(0x10000));
  EXPECT_EQ(a.k, reinterpret_cast<const void*>(0x20000));
  EXPECT_EQ(a.v, reinterpret_cast<const void*>(0x30000));
  EXPECT_EQ(a.o, reinterpret_cast<void*>(0x40000));
  EXPECT_EQ(a.lse, reinterpret_cast<float*>(0x50000));
  EXPECT_EQ(a.q_batch_stride, 16 * 5 * 64);
  EXPECT_EQ(a.q_head_stride, 5 * 64);
  EXPECT_EQ(a.k_batch_stride, 2 * 1000 * 64);
  EXPECT_EQ(a.v_head_stride, 1000 * 64);
  EXPECT_EQ(a.o_row_stride, 64);
  EXPECT_EQ(a.group, 8);
  EXPECT_EQ(a.splits, 3);
  EXPECT_EQ(a.tiles_per_split, 6);  // 16 tiles of 64 keys: 6, 6, 4
  EXPECT_EQ(a.seq_q, 5);
  EXPECT_EQ(a.seq_k, 1000);
  EXPECT_FLOAT_EQ(a.scale, 0.125f);
  EXPECT_EQ(std::memcmp(&l.args[0], &l.args[1], sizeof a), 0);  // one struct for both kernels

  // One split: o written directly, no combine, no workspace needed.
  const Params one = op().parse_params("splits=1,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(op().kernels(one, p, DType::f16).size(), 1u);
  const RecordingLauncher<FlashDecodeArgs> l1 = run(one, p, 0);
  ASSERT_EQ(l1.launches.size(), 1u);
  EXPECT_EQ(l1.launches[0].grid[1], 1u);
  EXPECT_EQ(l1.args[0].part_o, nullptr);
  // Several splits without a workspace: a clear error, nothing launched.
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0); }),
                       "flash_decode: splits=3 needs a 16-byte aligned workspace"));
  EXPECT_FLOAT_EQ(run(params, p, 0x100000, 0.3).args[0].scale, 0.3f);
  EXPECT_TRUE(contains(
      run_error([&] { run(params, p, 0x100000, std::numeric_limits<double>::infinity()); }),
      "not finite"));
}

// merge=1: the splits of each (row tile, batch, KV head) are one thread block cluster along x;
// one kernel, no workspace, no combine. Its reasons name the value and what is allowed.
TEST(DecodeRun, ClusterMergeIsOneKernelWithoutWorkspace) {
  const Problem p = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const Params params =
      op().parse_params("splits=4,block_m=32,block_n=64,warps=2,stages=4,merge=1");
  EXPECT_EQ(op().params_key(params), "splits=4,block_m=32,block_n=64,warps=2,stages=4,merge=1");
  // merge=0 is left out of keys, so the keys written before merge existed mean what they meant.
  const Params plain = op().parse_params("splits=4,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(plain.values[5], 0);
  EXPECT_EQ(op().params_key(plain), "splits=4,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(why(op().params_key(params), op().problem_key(p)), "");
  EXPECT_EQ(op().workspace_bytes(params, p, DType::f16), 0u);
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true, 0, false, false, "
            "false, false, 4>");
  const RecordingLauncher<FlashDecodeArgs> l = run(params, p, 0);
  ASSERT_EQ(l.launches.size(), 1u);
  const KernelLaunch& split = l.launches[0];
  EXPECT_EQ(split.grid[0], 4u);  // splits, one cluster
  EXPECT_EQ(split.grid[1], 2u);  // 40 packed rows in tiles of 32
  EXPECT_EQ(split.grid[2], 6u);  // b * hkv
  EXPECT_EQ(split.cluster, 4u);
  EXPECT_FALSE(split.programmatic);
  EXPECT_EQ(split.shared_bytes, op().dynamic_shared_bytes(params, p, DType::f16, 0));
  EXPECT_EQ(l.args[0].part_o, nullptr);
  EXPECT_EQ(l.args[0].part_lse, nullptr);
  EXPECT_EQ(l.args[0].splits, 4);
  EXPECT_EQ(l.args[0].tiles_per_split, 4);  // 16 tiles of 64 keys
  // Mask variants spell every template argument up to the cluster size.
  const Problem w = op().parse_problem("b=1,hq=64,hkv=8,nq=1,nk=32768,d=128,window=4096,softcap=yes");
  EXPECT_EQ(op().kernels(op().parse_params("splits=16,block_m=16,block_n=64,warps=4,stages=3,"
                                           "merge=1"),
                         w, DType::bf16)[0]
                .name_expression,
            "ktune::flash_decode_split<ktune::bf16, 128, 16, 64, 4, 3, false, 0, true, true, "
            "false, false, 16>");

  EXPECT_EQ(why("splits=3,block_m=32,block_n=64,warps=2,stages=4,merge=1", op().problem_key(p)),
            "merge=1 with splits=3: a cluster holds 2, 4, 8 or 16 splits (use merge=0, the "
            "combine kernel)");
  EXPECT_EQ(why("splits=1,block_m=32,block_n=64,warps=2,stages=4,merge=1", op().problem_key(p)),
            "merge=1 with splits=1: a cluster holds 2, 4, 8 or 16 splits (use merge=0, the "
            "combine kernel)");
  EXPECT_EQ(why("splits=4,block_m=16,block_n=64,warps=4,stages=3,merge=1", kPagedBar),
            "merge=1 with page=16: clusters merge contiguous, fixed-length K/V only (a split past "
            "a sequence's end exits before the cluster's barriers)");
  EXPECT_EQ(why("splits=4,block_m=16,block_n=64,warps=4,stages=3,merge=1",
                "b=2,hq=8,hkv=2,nq=1,nk=1000,d=128,varlen=yes"),
            "merge=1 with varlen=yes: clusters merge contiguous, fixed-length K/V only (a split "
            "past a sequence's end exits before the cluster's barriers)");
  EXPECT_EQ(why("splits=4,block_m=32,block_n=64,warps=2,stages=4,merge=1", op().problem_key(p),
                "sm_80"),
            "merge=1 needs thread block clusters (compute capability 9.0 or later; this device "
            "has 8.0)");
  EXPECT_EQ(why("splits=4,block_m=32,block_n=64,warps=2,stages=4", op().problem_key(p), "sm_80"),
            "");
}

// tma=1 spells every template argument up to KV_SPLIT, then TMA; the combine is unchanged.
TEST(DecodeRun, TmaSpellsEveryArgument) {
  const Problem p = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const Params params =
      op().parse_params("splits=4,block_m=32,block_n=64,warps=2,stages=4,tma=1");
  EXPECT_EQ(op().params_key(params), "splits=4,block_m=32,block_n=64,warps=2,stages=4,tma=1");
  EXPECT_EQ(op().parse_params("splits=4,block_m=32,block_n=64,warps=2,stages=4").values[7], 0);
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true, 0, false, false, "
            "false, false, 1, 64, false, true>");
  EXPECT_EQ(ks[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 64>");
  EXPECT_EQ(op().dynamic_shared_bytes(params, p, DType::f16, 0),
            op().dynamic_shared_bytes(op().parse_params("splits=4,block_m=32,block_n=64,warps=2,"
                                                        "stages=4"),
                                      p, DType::f16, 0) +
                kFlashDecodeTmaExtra);
}

TEST(DecodeRun, StridesComeFromTheLayout) {
  const Problem p = op().parse_problem("b=2,hq=4,hkv=1,nq=3,nk=33,d=128");
  const Params params = op().default_params(p, DType::bf16, device("sm_90a"));
  // [B, S, H, D] for q and o, [B, H, S, D] for k and v.
  std::int64_t layout[12] = {3 * 4 * 128, 128,      4 * 128, 33 * 128,    33 * 128, 128,
                             33 * 128,    33 * 128, 128,     3 * 4 * 128, 128,      4 * 128};
  const FlashDecodeArgs a = run(params, p, 0x100000, 0, layout).args[0];
  EXPECT_EQ(a.q_head_stride, 128);
  EXPECT_EQ(a.q_row_stride, 512);
  EXPECT_EQ(a.k_head_stride, 33 * 128);
  EXPECT_EQ(a.o_row_stride, 512);
  layout[5] = 100;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0x100000, 0, layout); }),
                       "flash_decode: k seq stride 100 must be a positive multiple of 8"));
  layout[5] = 128;
  layout[9] = -8;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0x100000, 0, layout); }),
                       "o batch stride -8 must be a non-negative multiple of 8"));
}

TEST(DecodeRun, ReferenceIsFlashAttentions) {
  const Problem p = op().parse_problem("b=2,hq=8,hkv=2,nq=17,nk=5,d=96,causal=yes");
  const auto ref = op().reference_kernels(p, DType::f16);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].file, "attention/reference.cuh");
  // flash_attention's reference for the same 7 dims, its own later dims (mask variants) at their
  // defaults: the page dim never reaches it.
  const Op& fa = get_op("flash_attention");
  EXPECT_EQ(ref[0], fa.reference_kernels(fa.parse_problem("b=2,hq=8,hkv=2,nq=17,nk=5,d=96,"
                                                          "causal=yes"),
                                         DType::f16)[0]);
  const Params params = op().default_params(p, DType::f16, device("sm_80"));
  const std::uint64_t tensors[5] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000};
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scale = 0;
  RunArgs a;
  a.params = &params;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = &scale;
  a.kernels = &kernel;
  RecordingLauncher<FlashAttentionArgs> l;
  op().run_reference(a, l);
  ASSERT_EQ(l.launches.size(), 1u);
  const unsigned warps = l.launches[0].block[0] / 32;
  EXPECT_GE(l.launches[0].grid[0] * warps, 17u);
  EXPECT_LT((l.launches[0].grid[0] - 1) * warps, 17u);
  EXPECT_EQ(l.launches[0].grid[1], 16u);
  EXPECT_EQ(l.args[0].heads_kv, 2);
  EXPECT_EQ(l.args[0].k_head_stride, 5 * 96);
}

// ---- the split-KV math, in double ----

TEST(DecodeMath, SplitsAndWarpsMergeToPlainAttention) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const std::size_t d = 16;
  int checked = 0;
  for (long long nk : {1LL, 17LL, 100LL, 333LL})
    for (long long nq : {1LL, 3LL, 40LL})
      for (bool causal : {false, true})
        for (int block_n : {32, 64})
          for (int warps : {1, 2})
            for (int splits : {1, 2, 3, 5}) {
              if (flash_decode_used_splits(nk, block_n, splits) != splits) continue;
              const long long group = 2;
              std::vector<std::vector<double>> k(static_cast<std::size_t>(nk)), v = k;
              for (auto& row : k) {
                row.resize(d);
                for (double& x : row) x = u(rng);
              }
              for (auto& row : v) {
                row.resize(d);
                for (double& x : row) x = u(rng);
              }
              const long long per = flash_decode_tiles_per_split(nk, block_n, splits);
              const int kw = block_n / warps;
              for (long long r = 0; r < flash_decode_rows(group, nq); ++r) {
                std::vector<double> q(d);
                for (double& x : q) x = u(rng);
                const long long limit = flash_decode_row_limit(r, group, nq, nk, causal);
                const Partial full = attend(q, k, v, 0.25, 0, nk, limit);
                // Splits of `per` tiles; inside a split, warp w takes keys
                // [w * kw, (w + 1) * kw) of every tile (one online state per warp).
                std::vector<Partial> split_parts;
                for (int s = 0; s < splits; ++s) {
                  std::vector<Partial> warp_parts;
                  for (int w = 0; w < warps; ++w) {
                    std::vector<Partial> slices;
                    for (long long n = s * per; n < std::min((s + 1) * per,
                                                             flash_decode_tiles(nk, block_n));
                         ++n) {
                      const long long k0 = n * block_n + w * kw;
                      slices.push_back(attend(q, k, v, 0.25, k0, std::min(nk, k0 + kw), limit));
                    }
                    warp_parts.push_back(merge(slices, d));
                  }
                  split_parts.push_back(merge(warp_parts, d));
                }
                const Partial combined = merge(split_parts, d);
                if (std::isinf(full.lse)) {
                  EXPECT_TRUE(std::isinf(combined.lse) && combined.lse < 0);
                } else {
                  EXPECT_NEAR(combined.lse, full.lse, 1e-12);
                }
                for (std::size_t i = 0; i < d; ++i) ASSERT_NEAR(combined.o[i], full.o[i], 1e-12);
                ++checked;
              }
            }
  EXPECT_GT(checked, 1000);
}

// ---- the rest of the interface ----

TEST(DecodeOp, TensorsBytesFlopsTolerance) {
  const Problem p = op().parse_problem(kBar1);
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  ASSERT_EQ(ts.size(), 6u);
  const char* names[] = {"q", "k", "v", "o", "lse", "alibi_slopes"};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(ts[i].name, names[i]);
  EXPECT_TRUE(ts[4].optional);
  EXPECT_EQ(ts[4].dtype, DType::f32);
  EXPECT_TRUE(ts[5].optional);  // alibi=no
  // Decode is K/V-bound: 16 x 8 x 4096 x 128 x 2 bytes each for K and V (268 MB at the bar); the
  // slopes are not read without ALiBi.
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   2.0 * (2 * 16 * 32 * 128 + 2 * 16 * 8 * 4096 * 128) + 4.0 * 16 * 32);
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 16 * 32 * 128 * 4096);
  // Causal: row i of nq sees nk - nq + 1 + i keys.
  const Problem c = op().parse_problem("b=1,hq=2,hkv=1,nq=3,nk=10,d=64,causal=yes");
  EXPECT_DOUBLE_EQ(op().flops(c, DType::bf16), 4.0 * 2 * 64 * (8 + 9 + 10));
  EXPECT_DOUBLE_EQ(op().tolerance(DType::bf16).rtol, 2e-2);
  EXPECT_DOUBLE_EQ(op().tolerance(DType::f16).atol, 5e-3);
  EXPECT_EQ(op().alignment(op().default_params(p, DType::bf16, device("sm_90a")), p, DType::bf16),
            16u);
  ASSERT_EQ(op().scalars().size(), 2u);
  EXPECT_EQ(op().scalars()[0].name, "scale");
  EXPECT_EQ(op().scalars()[1].name, "softcap");
}

TEST(DecodeOp, SourceFilesAndHash) {
  const std::vector<std::string_view> files = op().source_files();
  const auto has = [&](std::string_view f) {
    return std::find(files.begin(), files.end(), f) != files.end();
  };
  EXPECT_TRUE(has("decode/flash_decode.cuh"));
  EXPECT_TRUE(has("decode/args.h"));
  EXPECT_TRUE(has("attention/mma.cuh"));
  EXPECT_TRUE(has("common/types.cuh"));
  EXPECT_FALSE(has("attention/flash_attention.cuh"));
  EXPECT_EQ(op().template_hash().size(), 64u);
  for (const Op* other : all_ops())
    if (other != &op()) {
      EXPECT_NE(other->template_hash(), op().template_hash()) << other->name();
    }
  // flash_attention's hash (the shipped database's key) does not cover decode/.
  for (std::string_view f : get_op("flash_attention").source_files())
    EXPECT_NE(f.substr(0, 7), "decode/") << f;
}

// ---- NVRTC: defaults and a sample of the space compile for sm_80 and sm_90a ----

TEST(DecodeCompile, DefaultsAndASampleCompile) {
  std::set<std::pair<std::string, std::string>> seen;  // (arch, name expression)
  std::vector<CompileJob> jobs;
  std::vector<bool> is_default;
  const auto add = [&](const Problem& p, DType t, const Params& params, const std::string& arch,
                       bool def) {
    for (const KernelSource& k : op().kernels(params, p, t))
      if (seen.insert({arch, k.name_expression}).second) {
        jobs.push_back({k, arch, {}});
        is_default.push_back(def);
      }
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    // Defaults: decode (nq = 1) and a longer query block for d = 64, 128, 256, bf16 without
    // and fp16 with the causal mask; the combine kernel comes with every split default.
    for (std::int64_t d : {64, 128, 256})
      for (const char* dims : {"b=1,hq=64,hkv=8,nq=1,nk=32768", "b=1,hq=32,hkv=8,nq=16,nk=8192"})
        for (DType t : {DType::bf16, DType::f16}) {
          const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                               (t == DType::f16 ? ",causal=yes" : ""));
          add(p, t, op().default_params(p, t, dev), arch, true);
        }
    // Splits merged in a cluster (sm_90a): the bars' shapes at each head dim, 8 and 16 splits,
    // one with every mask variant.
    if (dev.cc_major >= 9)
      for (std::int64_t d : {64, 128, 256})
        for (const char* extra : {"", ",window=4096,softcap=yes,alibi=yes"}) {
          const Problem p = op().parse_problem("b=1,hq=64,hkv=8,nq=1,nk=32768,d=" +
                                               std::to_string(d) + extra);
          Params params = op().default_params(p, DType::bf16, dev);
          params.values[0] = *extra ? 8 : 16;
          params.values[5] = 1;
          ASSERT_EQ(op().invalid_reason(params, p, DType::bf16, dev), std::nullopt)
              << op().params_key(params);
          add(p, DType::bf16, params, arch, true);
        }
    // tma=1 (sm_90a): the bars' shapes at each head dim, alone, merged in clusters of 16, and
    // causal with every mask variant; d=112 in d=128's tiles (its last box half zeros).
    if (dev.cc_major >= 9)
      for (const char* dims : {"b=1,hq=64,hkv=8,nq=1,nk=32768,d=64", "b=1,hq=64,hkv=8,nq=1,"
                               "nk=32768,d=128", "b=1,hq=64,hkv=8,nq=1,nk=32768,d=256",
                               "b=16,hq=32,hkv=8,nq=3,nk=4096,d=112,causal=yes,window=1000,"
                               "softcap=yes,alibi=yes"})
        for (int merge : {0, 1}) {
          const Problem p = op().parse_problem(dims);
          Params params = op().default_params(p, DType::bf16, dev);
          params.values[0] = merge ? 16 : params.values[0];
          params.values[5] = merge;
          params.values[7] = 1;
          ASSERT_EQ(op().invalid_reason(params, p, DType::bf16, dev), std::nullopt)
              << dims << " " << op().params_key(params);
          add(p, DType::bf16, params, arch, true);
        }
    // Cluster sizes the kernel merges (any of 2-16) but the op does not offer yet (2, 4, 8 or 16
    // splits until a GPU run measures others; benchmarks/decode/NOTES.md, the cluster probe):
    // 3 (one batch shorter than the combine's 8) and 12 (a batch of 8, then 4 one at a time).
    if (dev.cc_major >= 9) {
      const Problem p = op().parse_problem("b=1,hq=64,hkv=8,nq=1,nk=32768,d=128");
      Params params = op().default_params(p, DType::bf16, dev);
      params.values[0] = 16;
      params.values[5] = 1;
      const KernelSource k = op().kernels(params, p, DType::bf16)[0];
      const std::string tail = ", 16>";
      ASSERT_GT(k.name_expression.size(), tail.size());
      ASSERT_EQ(k.name_expression.substr(k.name_expression.size() - tail.size()), tail);
      for (const char* size : {"3", "12"}) {
        KernelSource other = k;
        other.name_expression.replace(other.name_expression.size() - tail.size(), tail.size(),
                                      std::string(", ") + size + ">");
        if (seen.insert({arch, other.name_expression}).second) {
          jobs.push_back({other, arch, {}});
          is_default.push_back(true);  // no spills, as the merged defaults
        }
      }
    }
    // A sample of the space: a few valid points per head dim, among them those at the edge of
    // the accumulator budget (the split count does not change the kernels).
    for (std::int64_t d : {64, 128, 256}) {
      const Problem p =
          op().parse_problem("b=1,hq=16,hkv=2,nq=5,nk=8192,d=" + std::to_string(d));
      const std::vector<Params> valid = Space(op(), p, DType::bf16, dev).valid_points();
      for (std::size_t i = 0; i < valid.size(); i += valid.size() / 5 + 1)
        add(p, DType::bf16, valid[i], arch, false);
      for (const Params& v : valid)
        if (flash_decode_accumulators(static_cast<int>(d), static_cast<int>(v.values[1]),
                                      static_cast<int>(v.values[2]),
                                      static_cast<int>(v.values[3])) == 144) {
          add(p, DType::bf16, v, arch, false);
          break;
        }
    }
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%s %-6s %-66s %3d registers, stack %d, spills %d/%d\n",
                is_default[i] ? "default" : "sample ", jobs[i].arch.c_str(), expr.c_str(),
                r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    EXPECT_LE(r.registers, 255) << expr;
    // The defaults keep everything in registers. Other valid points may spill a few dozen
    // bytes (ptxas hoists K fragments); the accumulator budget rules out the hundreds beyond
    // it, and timing decides the rest.
    if (is_default[i]) {
      EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
    } else {
      EXPECT_LE(r.spill_stores, 64) << jobs[i].arch << " " << expr;
    }
  }
}

// flash_decode hands its contiguous reference, tolerance and flops to flash_attention: the two
// must read the same first 7 dims and the mask variants, the same six tensors, scalars and
// strides.
TEST(FlashDecodeOp, SharesFlashAttentionsProblemLayout) {
  const Op& decode = get_op("flash_decode");
  const Op& fa = get_op("flash_attention");
  ASSERT_GE(fa.dims().size(), 11u);
  ASSERT_EQ(decode.dims().size(), 12u);
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(decode.dims()[i].name, fa.dims()[i].name);
    EXPECT_EQ(decode.dims()[i].choices, fa.dims()[i].choices);
  }
  EXPECT_EQ(decode.dims()[7].name, "page");
  // The variants and varlen: decode's 8..11 are flash_attention's 7..10, the same in every field
  // the parser, the keys and the lookup read.
  for (std::size_t i = 0; i < 4; ++i) {
    const DimSpec& d = decode.dims()[8 + i];
    const DimSpec& f = fa.dims()[7 + i];
    EXPECT_EQ(d.name, f.name);
    EXPECT_EQ(d.min, f.min);
    EXPECT_EQ(d.max, f.max);
    EXPECT_EQ(d.choices, f.choices);
    EXPECT_EQ(d.def, f.def);
    EXPECT_EQ(d.exact, f.exact);
    EXPECT_EQ(d.regimes, f.regimes);
    EXPECT_EQ(d.keyed_at_default, f.keyed_at_default);
    EXPECT_FALSE(d.keyed_at_default) << d.name;
  }
  for (const char* variants : {"", ",window=100,softcap=yes,alibi=yes"}) {
    const std::string shape = std::string("b=3,hq=32,hkv=8,nq=5,nk=1000,d=128,causal=yes") +
                              variants;
    const auto a = decode.tensors(decode.parse_problem(shape), DType::bf16);
    const auto b = fa.tensors(fa.parse_problem(shape), DType::bf16);
    ASSERT_EQ(a.size(), 6u);
    ASSERT_GE(b.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].elements, b[i].elements);
      EXPECT_EQ(a[i].role, b[i].role);
      EXPECT_EQ(a[i].dtype, b[i].dtype);
      EXPECT_EQ(a[i].optional, b[i].optional) << a[i].name << variants;
      EXPECT_EQ(a[i].fill.kind, b[i].fill.kind);
      EXPECT_EQ(a[i].fill.lo, b[i].fill.lo);
      EXPECT_EQ(a[i].fill.hi, b[i].fill.hi);
    }
  }
  ASSERT_EQ(decode.scalars().size(), 2u);
  ASSERT_GE(fa.scalars().size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(decode.scalars()[i].name, fa.scalars()[i].name);
    EXPECT_EQ(decode.scalars()[i].tuning_value, fa.scalars()[i].tuning_value);
  }
  EXPECT_EQ(decode.layout_size(), fa.layout_size());
}

}  // namespace
}  // namespace ktune
