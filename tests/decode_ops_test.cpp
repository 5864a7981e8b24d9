// The flash_decode op's host side: problems and reasons, the space and its invalid reasons,
// defaults (the split count from the device), the workspace, launches through a recording
// launcher, a double-precision model of the split-KV partition and both merges (warps inside a
// CTA, then splits) against plain softmax attention, and NVRTC compiles for sm_80 and sm_90a.
// Paged KV: the page dim and its reasons, the tensors and their fills, the launches and the
// reference, a double model of the gather through the block table (page slots read one tile
// ahead, per-sequence lengths, empty splits skipped by the kernel and the combine alike), the
// tuner's permutation and integer-range fills, and NVRTC compiles of the paged kernels.
// Mask variants (window, softcap, alibi): dims and keys (keys written before them unchanged),
// name expressions (a kernel without variants keeps its own), tensors, scalars and arguments, the
// references they reach, a double model of the window's tile skipping and masks with soft-capping
// and ALiBi through splits and the combine, and NVRTC compiles of every combination's defaults.
// Variable-length batches (varlen): the dim (keys unchanged when off; refused with pages), the
// tensors in flash_attention's order sized by the tuner's lengths (an empty-key sequence among
// them), bytes and flops over the real lengths, launches sized from the upper bounds, the
// reference (flash_attention's with VARLEN), the defaults' splits, and NVRTC compiles of a sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "search/space.hpp"
#include "templates/attention/args.h"
#include "templates/common/check_args.h"
#include "templates/decode/args.h"
#include "templates/decode/decode_op.hpp"
#include "tests/support/compile_report.hpp"

namespace ktune {
namespace {

const Op& op() { return flash_decode_op(); }
DeviceInfo device(std::string_view arch) { return *device_for_arch(arch); }
std::size_t kv_split_index() {
  const std::vector<Tunable>& ts = op().tunables();
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].name == "kv_split") return i;
  return ts.size();
}

/// The bf16 default for `problem` on `dev`, which must be a point the op can run there.
Params checked_default(const std::string& problem, const DeviceInfo& dev) {
  const Problem p = op().parse_problem(problem);
  const Params params = op().default_params(p, DType::bf16, dev);
  EXPECT_EQ(op().invalid_reason(params, p, DType::bf16, dev), std::nullopt) << problem;
  return params;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string problem_error(const std::string& shape) {
  try {
    op().parse_problem(shape);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

std::string run_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

std::string why(const std::string& params, const std::string& problem,
                const char* arch = "sm_90a") {
  return op()
      .invalid_reason(op().parse_params(params), op().parse_problem(problem), DType::bf16,
                      device(arch))
      .value_or("");
}

/// Records launches and copies each argument struct (it lives on run()'s stack).
template <typename Args>
class RecordingLauncher final : public Launcher {
 public:
  void launch(const KernelLaunch& l) override {
    launches.push_back(l);
    Args a{};
    EXPECT_EQ(l.args_size, sizeof a);
    std::memcpy(&a, l.args, sizeof a);
    args.push_back(a);
  }
  std::vector<KernelLaunch> launches;
  std::vector<Args> args;
};

/// Runs the op with `tensors` (its table of device pointers), the workspace at `workspace`,
/// kernel handles 0x100 and 0x200 and scalars scale and softcap; the launches are recorded.
RecordingLauncher<FlashDecodeArgs> run_with(const Params& params, const Problem& p,
                                            const std::uint64_t* tensors,
                                            std::uint64_t workspace, double scale,
                                            const std::int64_t* layout, double softcap) {
  const KernelHandle kernels[2] = {reinterpret_cast<KernelHandle>(0x100),
                                   reinterpret_cast<KernelHandle>(0x200)};
  const double scalars[2] = {scale, softcap};
  RunArgs a;
  a.params = &params;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = kernels;
  a.workspace = workspace;
  a.layout = layout;
  RecordingLauncher<FlashDecodeArgs> l;
  op().run(a, l);
  return l;
}

/// Runs the op with tensors at 0x10000 * (i + 1) (alibi_slopes at `slopes`), the workspace at
/// 0x100000, kernel handles 0x100 and 0x200, scalars scale and softcap.
RecordingLauncher<FlashDecodeArgs> run(const Params& params, const Problem& p,
                                       std::uint64_t workspace = 0x100000, double scale = 0.0,
                                       const std::int64_t* layout = nullptr,
                                       double softcap = 50.0, std::uint64_t slopes = 0x60000) {
  const std::uint64_t tensors[6] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000, slopes};
  return run_with(params, p, tensors, workspace, scale, layout, softcap);
}

const char* const kBar1 = "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128";
const char* const kBar2 = "b=1,hq=64,hkv=8,nq=1,nk=32768,d=128";
// The issue's paged bar: 64 sequences of 100..8000 keys in pages of 16.
const char* const kPagedBar = "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,page=16";

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
  EXPECT_EQ(h100.points().size(), 14u * 3 * 3 * 3 * 3 * 2 * 2);  // ... merge, kv_split
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
  // nowhere (d=96's tiles only).
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
  EXPECT_EQ(h100.valid_count(), expected);

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
  // over 64 packed rows the largest tile the accumulators allow, 2 CTAs per SM at d=128.
  EXPECT_EQ(key("b=1,hq=32,hkv=8,nq=16,nk=4096,d=64", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=2,hq=48,hkv=4,nq=12,nk=5000,d=128,causal=yes", h100),
            "splits=6,block_m=32,block_n=64,warps=4,stages=3");
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
            "splits=4,block_m=16,block_n=32,warps=2,stages=2");
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
  EXPECT_EQ(key(kBar1, h100_sxm), "splits=1,block_m=16,block_n=64,warps=4,stages=3");
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
  // (benchmarks/decode/NOTES.md); two splits merge (TwoSplitsOfTheRowsTilesMergeInACluster).
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=8000,d=128", h100),
            "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=4096,d=128", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  // A grid under half a wave (8 (batch, KV head) pairs, one 32-row tile, 6 splits: 48 CTAs)
  // takes 16-row tiles and splits of 128 keys or more: 2 x 8 x 8 = 128 CTAs.
  EXPECT_EQ(key("b=4,hq=16,hkv=2,nq=4,nk=2000,d=128,causal=yes", h100),
            "splits=8,block_m=16,block_n=64,warps=4,stages=3");
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

struct Partial {
  std::vector<double> o;  // normalised by its own sum; 0 when no key was seen
  double lse = -std::numeric_limits<double>::infinity();
};

/// Softmax attention of one query over keys [k0, k1) visible below `limit`, normalised.
Partial attend(const std::vector<double>& q, const std::vector<std::vector<double>>& k,
               const std::vector<std::vector<double>>& v, double scale, long long k0,
               long long k1, long long limit) {
  const std::size_t d = q.size();
  Partial p;
  p.o.assign(d, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  std::vector<double> s;
  for (long long j = k0; j < std::min(k1, limit); ++j) {
    double x = 0;
    for (std::size_t i = 0; i < d; ++i) x += q[i] * k[static_cast<std::size_t>(j)][i];
    s.push_back(x * scale);
    m = std::max(m, s.back());
  }
  if (s.empty()) return p;
  double l = 0;
  for (std::size_t n = 0; n < s.size(); ++n) {
    const double e = std::exp(s[n] - m);
    l += e;
    for (std::size_t i = 0; i < d; ++i) p.o[i] += e * v[static_cast<std::size_t>(k0) + n][i];
  }
  for (double& x : p.o) x /= l;
  p.lse = m + std::log(l);
  return p;
}

/// The merge both kernels do: weights exp(lse_i - lse) with lse = log sum_i exp(lse_i).
Partial merge(const std::vector<Partial>& parts, std::size_t d) {
  Partial out;
  out.o.assign(d, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (const Partial& p : parts) m = std::max(m, p.lse);
  if (std::isinf(m)) return out;
  double l = 0;
  for (const Partial& p : parts) l += std::exp(p.lse - m);
  out.lse = m + std::log(l);
  for (const Partial& p : parts)
    for (std::size_t i = 0; i < d; ++i) out.o[i] += std::exp(p.lse - out.lse) * p.o[i];
  return out;
}

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

// ---- paged KV ----

/// Runs a paged problem with tensors q, k_cache, v_cache, o, lse, block_table, seq_lens,
/// alibi_slopes at 0x10000 * (i + 1) (the slopes at `slopes`), scalars scale (0) and softcap.
RecordingLauncher<FlashDecodeArgs> run_paged(const Params& params, const Problem& p,
                                             const std::int64_t* layout = nullptr,
                                             std::uint64_t block_table = 0x60000,
                                             double softcap = 50.0,
                                             std::uint64_t slopes = 0x80000) {
  const std::uint64_t tensors[8] = {0x10000, 0x20000,     0x30000, 0x40000,
                                    0x50000, block_table, 0x70000, slopes};
  return run_with(params, p, tensors, 0x100000, 0.0, layout, softcap);
}

TEST(DecodePaged, PageIsAnExactDimWithReasons) {
  const Problem p = op().parse_problem(kPagedBar);
  EXPECT_EQ(p.values[7], 16);
  EXPECT_EQ(op().problem_key(p), "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,causal=no,page=16");
  EXPECT_EQ(op().parse_problem(op().problem_key(p)), p);
  // A key written before the page dim existed is the contiguous problem.
  EXPECT_EQ(op().parse_problem("b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no"),
            op().default_problem());
  const DimSpec& page = op().dims()[7];
  EXPECT_EQ(page.name, "page");
  EXPECT_TRUE(page.matched_exactly());
  EXPECT_EQ(page.def.value_or(-1), 0);
  for (int ok : {0, 16, 32, 64, 128, 256})
    EXPECT_EQ(problem_error("b=2,hq=8,hkv=2,nq=1,nk=100,d=64,page=" + std::to_string(ok)), "")
        << ok;
  for (int bad : {1, 8, 48, 100, 255})
    EXPECT_TRUE(
        contains(problem_error("b=2,hq=8,hkv=2,nq=1,nk=100,d=64,page=" + std::to_string(bad)),
                 "page=" + std::to_string(bad) +
                     " is not a supported page size (0: contiguous; 16, 32, 64, 128, "
                     "256)"))
        << bad;
  EXPECT_TRUE(contains(problem_error("b=65535,hq=1,hkv=1,nq=1,nk=1073741824,d=64,page=16"),
                       "b=65535 x 67108864 pages of page=16: more than 2^31 - 1 pages (int32 "
                       "page ids)"));
  EXPECT_EQ(problem_error("b=511,hq=1,hkv=1,nq=1,nk=1073741824,d=64,page=256"), "");
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,page=512"),
                       "out of range (allowed 0..256)"));
}

TEST(DecodePaged, TensorsInStableOrderWithTheirFills) {
  const Problem p = op().parse_problem("b=3,hq=16,hkv=4,nq=2,nk=1000,d=64,page=32,causal=yes");
  const std::vector<TensorSpec> ts = op().tensors(p, DType::f16);
  ASSERT_EQ(ts.size(), 8u);
  const char* names[] = {"q",   "k_cache",     "v_cache",  "o",
                         "lse", "block_table", "seq_lens", "alibi_slopes"};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(ts[i].name, names[i]);
  EXPECT_TRUE(ts[7].optional);  // alibi=no
  const std::int64_t pages = 3 * 32;  // ceil(1000 / 32) = 32 per sequence
  EXPECT_EQ(ts[0].elements, 3 * 16 * 2 * 64);
  EXPECT_EQ(ts[1].elements, pages * 32 * 4 * 64);
  EXPECT_EQ(ts[2].elements, ts[1].elements);
  EXPECT_EQ(ts[3].role, TensorRole::output);
  EXPECT_TRUE(ts[4].optional);
  EXPECT_EQ(ts[4].dtype, DType::f32);
  for (std::size_t i : {5, 6}) {
    EXPECT_EQ(ts[i].role, TensorRole::input);
    EXPECT_EQ(ts[i].dtype, DType::i32);
    EXPECT_FALSE(ts[i].optional);
  }
  EXPECT_EQ(ts[5].elements, pages);
  EXPECT_EQ(ts[5].fill.kind, Fill::Kind::permutation);
  EXPECT_EQ(ts[5].fill.first_int, pages);  // every page of the pool once
  EXPECT_EQ(ts[6].elements, 3);
  EXPECT_EQ(ts[6].fill.kind, Fill::Kind::uniform_int);
  EXPECT_EQ(ts[6].fill.first_int, 1000 / 16);
  EXPECT_EQ(ts[6].fill.last_int, 1000);
  // Short caches: lengths from 1.
  const Problem tiny = op().parse_problem("b=2,hq=8,hkv=8,nq=1,nk=7,d=64,page=16");
  EXPECT_EQ(op().tensors(tiny, DType::bf16)[6].fill.first_int, 1);
  EXPECT_EQ(op().tensors(tiny, DType::bf16)[5].elements, 2);
  // The contiguous problem's tensors are flash_attention's six.
  EXPECT_EQ(
      op().tensors(op().parse_problem("b=3,hq=16,hkv=4,nq=2,nk=1000,d=64"), DType::f16).size(), 6u);

  // Bytes: K/V rows of nk keys per sequence (an upper bound of seq_lens), not the pools' pages.
  const Problem bar = op().parse_problem(kPagedBar);
  const double kv = 2.0 * 2 * 64 * 8000 * 8 * 128;
  const double rest = 2.0 * 2 * 64 * 32 * 128 + 4.0 * (64 * 32 + 64 * 500 + 64);
  EXPECT_DOUBLE_EQ(op().min_bytes(bar, DType::bf16), kv + rest);
  EXPECT_DOUBLE_EQ(
      op().flops(bar, DType::bf16),
      op().flops(op().parse_problem("b=64,hq=32,hkv=8,nq=1,nk=8000,d=128"), DType::bf16));
}

TEST(DecodePaged, LaunchesReadThePoolsThroughTheTable) {
  const Problem p = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,page=16");
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(why("splits=3,block_m=32,block_n=64,warps=2,stages=4", op().problem_key(p)), "");
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true, 16>");
  EXPECT_EQ(ks[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 64>");
  // Two slots of 64 / 16 page ids after the ring.
  EXPECT_EQ(op().dynamic_shared_bytes(params, p, DType::f16, 0),
            32u * 144 + 4 * 2 * 64 * 128 + 2 * 4 * 4);
  const Problem p256 = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,page=256");
  EXPECT_EQ(op().dynamic_shared_bytes(params, p256, DType::f16, 0),
            32u * 144 + 4 * 2 * 64 * 128 + 2 * 4);

  const RecordingLauncher<FlashDecodeArgs> l = run_paged(params, p);
  ASSERT_EQ(l.launches.size(), 2u);
  EXPECT_EQ(l.launches[0].grid[0], 2u);
  EXPECT_EQ(l.launches[0].grid[1], 3u);
  EXPECT_EQ(l.launches[0].grid[2], 6u);
  EXPECT_EQ(l.launches[0].shared_bytes, op().dynamic_shared_bytes(params, p, DType::f16, 0));
  const FlashDecodeArgs& a = l.args[0];
  EXPECT_EQ(a.k, reinterpret_cast<const void*>(0x20000));
  EXPECT_EQ(a.v, reinterpret_cast<const void*>(0x30000));
  EXPECT_EQ(a.block_table, reinterpret_cast<const int*>(0x60000));
  EXPECT_EQ(a.seq_lens, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(a.page, 16);
  EXPECT_EQ(a.pages_per_seq, 63);  // ceil(1000 / 16)
  EXPECT_EQ(a.tiles_per_split, 6);
  EXPECT_EQ(a.split_keys, 6 * 64);
  EXPECT_EQ(a.seq_k, 1000);
  // The pools' strides (documentation: the kernel derives them from Hkv and D).
  EXPECT_EQ(a.k_batch_stride, 0);
  EXPECT_EQ(a.k_head_stride, 64);
  EXPECT_EQ(a.k_row_stride, 2 * 64);
  EXPECT_EQ(a.v_row_stride, 2 * 64);
  EXPECT_EQ(a.q_head_stride, 5 * 64);
  EXPECT_EQ(std::memcmp(&l.args[0], &l.args[1], sizeof a), 0);

  // The layout's q and o strides apply; its k and v entries are ignored, not checked.
  std::int64_t layout[12] = {5 * 16 * 64, 64, 16 * 64, -1, 3, 0, 7, 7, 7, 5 * 16 * 64, 64, 16 * 64};
  const FlashDecodeArgs b = run_paged(params, p, layout).args[0];
  EXPECT_EQ(b.q_row_stride, 16 * 64);
  EXPECT_EQ(b.o_head_stride, 64);
  EXPECT_EQ(b.k_row_stride, 2 * 64);
  layout[2] = 12;
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, p, layout); }),
                       "flash_decode: q seq stride 12 must be a positive multiple of 8"));
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, p, nullptr, 0); }),
                       "flash_decode: page=16 needs the block_table and seq_lens tensors"));
  // Contiguous problems never read the two extra tensors.
  const Problem c = op().parse_problem("b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const FlashDecodeArgs ca = run(params, c).args[0];
  EXPECT_EQ(ca.block_table, nullptr);
  EXPECT_EQ(ca.seq_lens, nullptr);
  EXPECT_EQ(ca.page, 0);
}

TEST(DecodePaged, ReferenceGathersThroughTheTable) {
  const Problem p = op().parse_problem("b=2,hq=8,hkv=2,nq=17,nk=300,d=96,causal=yes,page=64");
  const auto ref = op().reference_kernels(p, DType::bf16);
  ASSERT_EQ(ref.size(), 1u);
  // flash_attention's reference with its PAGE flag (tensors reordered to its order).
  EXPECT_EQ(ref[0].file, "attention/reference.cuh");
  EXPECT_EQ(ref[0].name_expression, "ktune::flash_attention_reference<ktune::bf16, 96, true, "
                                    "false, false, false, false, 64>");
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, 0x60000, 0x70000, 0x80000};
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {0, 50};
  RunArgs a;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = &kernel;
  RecordingLauncher<FlashAttentionArgs> l;
  op().run_reference(a, l);
  ASSERT_EQ(l.launches.size(), 1u);
  const unsigned warps = l.launches[0].block[0] / 32;
  EXPECT_GE(l.launches[0].grid[0] * warps, 17u);
  EXPECT_LT((l.launches[0].grid[0] - 1) * warps, 17u);
  EXPECT_EQ(l.launches[0].grid[1], 16u);
  EXPECT_EQ(l.args[0].o, reinterpret_cast<void*>(0x40000));
  EXPECT_EQ(l.args[0].block_table, reinterpret_cast<const int*>(0x60000));
  EXPECT_EQ(l.args[0].seq_lens, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(l.args[0].page, 64);
  EXPECT_EQ(l.args[0].pages_per_seq, 5);
  EXPECT_EQ(l.args[0].o_row_stride, 96);  // float elements
}

// The copy's slot and row formulas give the page and row of key key0 + rt + i * rpi for every
// tile, page size and copy shape (rpi = threads / (d / 8): 2 at d=256 with 2 warps, 64 at d=32
// with 8 warps).
TEST(DecodePaged, PageSlotsAddressEveryKey) {
  int checked = 0;
  for (int page : {16, 32, 64, 128, 256})
    for (int block_n : {32, 64, 128})
      for (int rpi : {2, 4, 8, 16, 32, 64}) {
        if (rpi > block_n) continue;
        EXPECT_EQ(paged_kv_slots(block_n, page), std::max(1, block_n / page));
        for (long long key0 = 0; key0 < 1024; key0 += block_n)
          for (int i = 0; i < block_n / rpi; ++i)
            for (int rt = 0; rt < rpi; ++rt) {
              const long long key = key0 + rt + i * rpi;
              // The tile's pages start at page key0 / page of the sequence's table row.
              ASSERT_EQ(key0 / page + paged_kv_copy_slot(i, rt, rpi, block_n, page), key / page)
                  << page << " " << block_n << " " << rpi << " " << key;
              ASSERT_EQ(paged_kv_copy_row(key0, i, rt, rpi, block_n, page), key % page);
              ASSERT_LT(paged_kv_copy_slot(i, rt, rpi, block_n, page),
                        paged_kv_slots(block_n, page));
              ++checked;
            }
      }
  EXPECT_GT(checked, 80000);
  EXPECT_EQ(flash_decode_seq_len(-3, 100), 0);
  EXPECT_EQ(flash_decode_seq_len(101, 100), 100);
  EXPECT_EQ(flash_decode_splits_used(0, 256, 4), 1);
  EXPECT_EQ(flash_decode_splits_used(256, 256, 4), 1);
  EXPECT_EQ(flash_decode_splits_used(257, 256, 4), 2);
  EXPECT_EQ(flash_decode_splits_used(5000, 256, 4), 4);
}

/// A paged layer in double: per sequence a length, a block table row, and pools of rows
/// (one KV head: the head offset is a constant added to every row).
struct PagedModel {
  int page, pages_per_seq;
  std::vector<int> table, lens;
  std::vector<std::vector<double>> k_pool, v_pool;  // [page id * page + row][d]
};

/// The keys the kernel reads for split `split` of sequence b: tile by tile, the page ids of each
/// tile coming from the table (prologue tiles) or from the two shared slots filled one tile
/// ahead, exactly in the kernel's order. Returns false when the CTA exits at once.
bool split_keys_of(const PagedModel& m, int b, int split, int tiles_per_split, int block_n,
                   int stages, long long row_limit_max, std::vector<long long>& keys,
                   std::vector<std::vector<double>>& k_rows,
                   std::vector<std::vector<double>>& v_rows) {
  const int len =
      flash_decode_seq_len(m.lens[static_cast<std::size_t>(b)], m.pages_per_seq * m.page);
  const int tiles = (len + block_n - 1) / block_n;
  const int n_begin = split * tiles_per_split;
  if (split > 0 && n_begin >= tiles) return false;
  int n_end = std::min(tiles, n_begin + tiles_per_split);
  if (row_limit_max < static_cast<long long>(n_end) * block_n)
    n_end = row_limit_max <= 0 ? 0 : static_cast<int>((row_limit_max + block_n - 1) / block_n);
  const int* table = m.table.data() + static_cast<std::size_t>(b) * m.pages_per_seq;
  const int slots = paged_kv_slots(block_n, m.page);
  std::vector<int> s_pages(2 * static_cast<std::size_t>(slots), -7);  // stale garbage
  const auto page_id = [&](int n, int slot) {
    const long long first = static_cast<long long>(n) * block_n / m.page + slot;
    if (first * m.page >= len) return 0;  // past the sequence: the table is not read
    EXPECT_LT(first, m.pages_per_seq);
    return table[first];
  };
  // The copy of 4 warps at d=128: 8 rows per pass.
  const int rpi = 8;
  const auto load = [&](int n, const int* pages) {
    const long long key0 = static_cast<long long>(n) * block_n;
    std::vector<long long> at(static_cast<std::size_t>(block_n), -1);
    for (int i = 0; i < block_n / rpi; ++i)
      for (int rt = 0; rt < rpi; ++rt)
        if (key0 + rt + i * rpi < len)
          at[static_cast<std::size_t>(rt + i * rpi)] =
              static_cast<long long>(pages[paged_kv_copy_slot(i, rt, rpi, block_n, m.page)]) *
                  m.page +
              paged_kv_copy_row(key0, i, rt, rpi, block_n, m.page);
    for (int row = 0; row < block_n && key0 + row < len; ++row) {
      keys.push_back(key0 + row);
      k_rows.push_back(m.k_pool[static_cast<std::size_t>(at[static_cast<std::size_t>(row)])]);
      v_rows.push_back(m.v_pool[static_cast<std::size_t>(at[static_cast<std::size_t>(row)])]);
    }
  };
  for (int s = 0; s < stages - 1; ++s)
    if (n_begin + s < n_end)
      load(n_begin + s, table + static_cast<long long>(n_begin + s) * block_n / m.page);
  {
    const int mt = n_begin + stages - 1;
    for (int t = 0; t < slots; ++t)
      if (mt < n_end) s_pages[static_cast<std::size_t>((mt & 1) * slots + t)] = page_id(mt, t);
  }
  for (int n = n_begin; n < n_end; ++n) {
    const int nl = n + stages - 1;
    if (nl < n_end) load(nl, s_pages.data() + (nl & 1) * slots);
    std::vector<int> next(static_cast<std::size_t>(slots), 0);
    for (int t = 0; t < slots; ++t)
      if (nl + 1 < n_end) next[static_cast<std::size_t>(t)] = page_id(nl + 1, t);
    for (int t = 0; t < slots; ++t)
      if (nl + 1 < n_end)
        s_pages[static_cast<std::size_t>(((nl + 1) & 1) * slots + t)] =
            next[static_cast<std::size_t>(t)];
  }
  return true;
}

TEST(DecodePaged, GatherSplitsAndCombineMatchPlainAttention) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const std::size_t d = 8;
  const long long group = 2;
  int checked = 0, exited = 0;
  for (long long nk : {1LL, 17LL, 100LL, 333LL})
    for (int page : {16, 32, 64, 128, 256})
      for (int block_n : {32, 64, 128})
        for (int splits : {1, 2, 3, 5})
          for (int stages : {2, 3, 4}) {
            if (flash_decode_used_splits(nk, block_n, splits) != splits) continue;
            const int b_count = 3;
            PagedModel m;
            m.page = page;
            m.pages_per_seq = static_cast<int>(paged_kv_pages(nk, page));
            const int pool = b_count * m.pages_per_seq;
            // The tuner's fills: a permutation of the pool's pages, lengths with both ends.
            for (int i = 0; i < pool; ++i)
              m.table.push_back(
                  static_cast<int>(fill_permute(nk * 7 + page, static_cast<unsigned long long>(i),
                                                static_cast<unsigned long long>(pool))));
            for (int i = 0; i < b_count; ++i)
              m.lens.push_back(static_cast<int>(
                  fill_int_value(nk + page, static_cast<unsigned long long>(i), 1, nk)));
            m.k_pool.resize(static_cast<std::size_t>(pool) * page);
            m.v_pool.resize(m.k_pool.size());
            for (auto* rows : {&m.k_pool, &m.v_pool})
              for (auto& row : *rows) {
                row.resize(d);
                for (double& x : row) x = u(rng);
              }
            const long long per = flash_decode_tiles_per_split(nk, block_n, splits);
            const int split_keys = static_cast<int>(per) * block_n;
            for (bool causal : {false, true})
              for (long long nq : {1LL, 3LL})
                for (int b = 0; b < b_count; ++b) {
                  const int len = m.lens[static_cast<std::size_t>(b)];
                  // The sequence's keys, contiguous, straight from the table.
                  std::vector<std::vector<double>> k, v;
                  for (int j = 0; j < len; ++j) {
                    const std::size_t at = static_cast<std::size_t>(
                        m.table[static_cast<std::size_t>(b * m.pages_per_seq + j / page)] * page +
                        j % page);
                    k.push_back(m.k_pool[at]);
                    v.push_back(m.v_pool[at]);
                  }
                  const int used = flash_decode_splits_used(len, split_keys, splits);
                  for (long long r = 0; r < flash_decode_rows(group, nq); ++r) {
                    std::vector<double> q(d);
                    for (double& x : q) x = u(rng);
                    const long long limit = flash_decode_row_limit(r, group, nq, len, causal);
                    const Partial full = attend(q, k, v, 0.25, 0, len, limit);
                    std::vector<Partial> parts;
                    for (int s = 0; s < splits; ++s) {
                      std::vector<long long> keys;
                      std::vector<std::vector<double>> kr, vr;
                      const bool ran = split_keys_of(
                          m, b, s, static_cast<int>(per), block_n, stages,
                          flash_decode_row_limit(r, group, nq, len, causal), keys, kr, vr);
                      // The kernel exits exactly for the splits the combine skips.
                      ASSERT_EQ(ran, s < used) << nk << " " << page << " " << s;
                      if (!ran) {
                        ++exited;
                        continue;
                      }
                      // Every key read is the sequence's own key, in order, from its page.
                      for (std::size_t i = 0; i < keys.size(); ++i) {
                        ASSERT_EQ(keys[i], s * per * block_n + static_cast<long long>(i));
                        ASSERT_EQ(kr[i], k[static_cast<std::size_t>(keys[i])]);
                        ASSERT_EQ(vr[i], v[static_cast<std::size_t>(keys[i])]);
                      }
                      const long long k0 = keys.empty() ? 0 : keys.front();
                      parts.push_back(attend(q, kr, vr, 0.25, 0,
                                             static_cast<long long>(keys.size()), limit - k0));
                    }
                    const Partial combined = merge(parts, d);
                    if (std::isinf(full.lse)) {
                      EXPECT_TRUE(std::isinf(combined.lse) && combined.lse < 0);
                    } else {
                      EXPECT_NEAR(combined.lse, full.lse, 1e-12);
                    }
                    for (std::size_t i = 0; i < d; ++i)
                      ASSERT_NEAR(combined.o[i], full.o[i], 1e-12);
                    ++checked;
                  }
                }
          }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(exited, 100);  // short sequences leave splits empty
}

// ---- the tuner's fills for paged problems ----

TEST(DecodePaged, PermutationFillUsesEveryPageOnce) {
  for (unsigned long long seed : {0ull, 1ull, 20241121ull * 1000003ull + 5})
    for (unsigned long long bound :
         {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 100ull, 1000ull, 4096ull, 32000ull, 65537ull}) {
      std::vector<char> seen(bound, 0);
      unsigned long long fixed = 0, ascending = 0;
      unsigned long long prev = 0;
      for (unsigned long long i = 0; i < bound; ++i) {
        const unsigned long long x = fill_permute(seed, i, bound);
        ASSERT_LT(x, bound) << seed << " " << bound;
        ASSERT_FALSE(seen[x]) << seed << " " << bound << " " << i;
        seen[x] = 1;
        fixed += x == i;
        ascending += i > 0 && x == prev + 1;
        prev = x;
      }
      // Fragmented: neither the identity nor runs of consecutive pages.
      if (bound >= 100) {
        EXPECT_LT(fixed, bound / 20 + 2) << bound;
        EXPECT_LT(ascending, bound / 20 + 2) << bound;
      }
    }
  int same = 0;  // the seed matters
  for (unsigned long long i = 0; i < 16; ++i)
    same += fill_permute(1, i, 1000) == fill_permute(2, i, 1000);
  EXPECT_LT(same, 4);
}

TEST(DecodePaged, UniformIntFillMixesLengthsWithinTheRange) {
  for (long long nk : {1LL, 2LL, 17LL, 1000LL, 8000LL, 1LL << 30}) {
    const long long lo = std::max(1LL, nk / 16);
    for (unsigned long long count : {1ull, 2ull, 3ull, 64ull}) {
      std::set<long long> values;
      for (unsigned long long i = 0; i < count; ++i) {
        const long long x = fill_int_value(77, i, lo, nk);
        ASSERT_GE(x, lo);
        ASSERT_LE(x, nk);
        values.insert(x);
      }
      EXPECT_EQ(*values.rbegin(), nk);  // element 0: the longest sequence
      if (count >= 2) {
        EXPECT_EQ(*values.begin(), lo);
        if (lo < nk) {
          EXPECT_GE(values.size(), 2u) << nk;  // never all equal
        }
      }
      if (count == 64 && nk >= 1000) {
        EXPECT_GT(values.size(), 50u);
      }
    }
  }
}

// ---- kv_split: d=96's K/V tiles in two parts (flash_decode_split96_offset) ----

/// A K/V tile layout (`offset(row, chunk)`, bytes) of `rows` rows of `chunks` 16-byte chunks:
/// every (row, chunk) a distinct 16-byte slot below rows * chunks * 16 bytes, and the 8 rows of
/// each ldmatrix phase (rows 8i..8i+7, one chunk) in 8 distinct bank groups.
template <typename Offset>
void expect_distinct_slots_and_banks(int rows, int chunks, Offset offset) {
  std::set<unsigned> slots;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < chunks; ++c) {
      const unsigned off = offset(r, c);
      EXPECT_EQ(off % 16, 0u);
      EXPECT_LT(off, static_cast<unsigned>(rows * chunks * 16));
      slots.insert(off);
    }
  EXPECT_EQ(slots.size(), static_cast<std::size_t>(rows * chunks)) << rows;
  for (int r0 = 0; r0 < rows; r0 += 8)
    for (int c = 0; c < chunks; ++c) {
      std::set<unsigned> banks;
      for (int r = r0; r < r0 + 8; ++r) banks.insert(offset(r, c) / 16 % 8);
      EXPECT_EQ(banks.size(), 8u) << "rows " << r0 << "+, chunk " << c;
    }
}

// The layout on the host: every (row, chunk) of a tile a distinct 16-byte slot of its 192-byte
// rows; the 8 rows of each ldmatrix phase in 8 distinct bank groups; each warp-wide pass of the
// copy (load_kv_tile: 4 rows of chunks 0-7, then 8 rows of chunks 8-11) exactly 4 whole
// 128-byte lines; and the split kernel's lane addresses (its k_lane / k_lane_b XOR forms,
// restated here) land where the copy wrote the chunk they name.
TEST(DecodeSplit96, LayoutCopiesAndReadsAgree) {
  for (int rows : {32, 64, 128}) {
    expect_distinct_slots_and_banks(
        rows, 12, [&](int r, int c) { return flash_decode_split96_offset(rows, r, c); });
    for (int id0 = 0; id0 < rows * 8; id0 += 32) {  // first pass: row id >> 3, chunk id & 7
      std::set<unsigned> lines;
      for (int id = id0; id < id0 + 32; ++id)
        lines.insert(flash_decode_split96_offset(rows, id >> 3, id & 7) / 128);
      EXPECT_EQ(lines.size(), 4u);
    }
    for (int id0 = 0; id0 < rows * 4; id0 += 32) {  // second: row id >> 2, chunk 8 + (id & 3)
      std::set<unsigned> lines;
      for (int id = id0; id < id0 + 32; ++id)
        lines.insert(flash_decode_split96_offset(rows, id >> 2, 8 + (id & 3)) / 128);
      EXPECT_EQ(lines.size(), 4u);
    }
    const unsigned part_b = static_cast<unsigned>(rows) * 128;
    for (int kw : {16, 32, 64})
      for (int warp = 0; warp * kw < rows; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const int k_c = (lane >> 3) & 1, v_c = lane >> 4;
          const int k_row = warp * kw + (lane & 7) + ((lane >> 4) << 3);
          const int v_row = warp * kw + (lane & 7) + (((lane >> 3) & 1) << 3);
          const unsigned k_lane = k_row * 128 + ((k_c ^ (lane & 7)) << 4);
          const unsigned v_lane = v_row * 128 + ((v_c ^ (lane & 7)) << 4);
          const unsigned k_lane_b = part_b + k_row * 64 + ((k_c ^ ((lane & 7) >> 1)) << 4);
          const unsigned v_lane_b = part_b + v_row * 64 + ((v_c ^ ((lane & 7) >> 1)) << 4);
          for (int kk = 0; kk < 6; ++kk)
            for (int nn = 0; nn < kw / 16; ++nn) {
              // Q K^T: keys k_row + 16 nn, chunk 2 kk + k_c; P V: keys v_row + 16 nn, chunk
              // 2 dd + v_c (dd = kk here).
              const unsigned k_at = kk >= 4 ? (k_lane_b ^ ((kk - 4) << 5)) + nn * 16 * 64
                                            : (k_lane ^ (kk << 5)) + nn * 16 * 128;
              const unsigned v_at = kk >= 4 ? (v_lane_b ^ ((kk - 4) << 5)) + nn * 16 * 64
                                            : (v_lane ^ (kk << 5)) + nn * 16 * 128;
              ASSERT_EQ(k_at, flash_decode_split96_offset(rows, k_row + 16 * nn, 2 * kk + k_c))
                  << rows << " " << kw << " " << warp << " " << lane << " " << kk << " " << nn;
              ASSERT_EQ(v_at, flash_decode_split96_offset(rows, v_row + 16 * nn, 2 * kk + v_c))
                  << rows << " " << kw << " " << warp << " " << lane << " " << kk << " " << nn;
            }
        }
  }
}

// d=32's swizzled 64-byte K/V rows (flash_decode_row64_offset): every slot once, the 8 rows of
// an ldmatrix phase in 8 bank groups, a warp's copies (row id / 4, chunk id % 4, as
// load_kv_tile's and the paged copy's) 4 whole lines, and the kernel's lane addresses (the
// 64-byte path from k-step 0, PART_B 0) equal to where the copy put each chunk.
TEST(DecodeRow64, D32LayoutCopiesAndReadsAgree) {
  EXPECT_TRUE(flash_decode_kv_swizzled(32));
  EXPECT_EQ(flash_decode_kv_pitch(32), 64);
  for (int rows : {32, 64, 128}) {
    expect_distinct_slots_and_banks(rows, 4, flash_decode_row64_offset);
    for (int id0 = 0; id0 < rows * 4; id0 += 32) {
      std::set<unsigned> lines;
      for (int id = id0; id < id0 + 32; ++id)
        lines.insert(flash_decode_row64_offset(id / 4, id % 4) / 128);
      EXPECT_EQ(lines.size(), 4u);
    }
    for (int kw : {16, 32, 64})
      for (int warp = 0; warp * kw < rows; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const int k_c = (lane >> 3) & 1, v_c = lane >> 4;
          const int k_row = warp * kw + (lane & 7) + ((lane >> 4) << 3);
          const int v_row = warp * kw + (lane & 7) + (((lane >> 3) & 1) << 3);
          const unsigned k_lane_b = k_row * 64 + ((k_c ^ ((lane & 7) >> 1)) << 4);
          const unsigned v_lane_b = v_row * 64 + ((v_c ^ ((lane & 7) >> 1)) << 4);
          for (int kk = 0; kk < 2; ++kk)
            for (int nn = 0; nn < kw / 16; ++nn) {
              ASSERT_EQ((k_lane_b ^ (kk << 5)) + nn * 16 * 64,
                        flash_decode_row64_offset(k_row + 16 * nn, 2 * kk + k_c))
                  << rows << " " << kw << " " << warp << " " << lane << " " << kk << " " << nn;
              ASSERT_EQ((v_lane_b ^ (kk << 5)) + nn * 16 * 64,
                        flash_decode_row64_offset(v_row + 16 * nn, 2 * kk + v_c))
                  << rows << " " << kw << " " << warp << " " << lane << " " << kk << " " << nn;
            }
        }
  }
}

// Where kv_split=1 is a point of the space, and why not elsewhere; its kernels' names.
TEST(DecodeSplit96, OnlyD96TilesTakeIt) {
  const DeviceInfo h100 = device("sm_90a");
  const Params split =
      op().parse_params("splits=1,block_m=16,block_n=64,warps=4,stages=3,kv_split=1");
  EXPECT_EQ(op().params_key(op().parse_params("splits=1,block_m=16,block_n=64,warps=4,stages=3")),
            "splits=1,block_m=16,block_n=64,warps=4,stages=3");
  for (int d : {72, 80, 88, 96}) {
    const Problem p = op().parse_problem("b=4,hq=32,hkv=8,nq=1,nk=4096,d=" + std::to_string(d));
    EXPECT_EQ(op().invalid_reason(split, p, DType::bf16, h100), std::nullopt) << d;
    EXPECT_EQ(op().kernels(split, p, DType::bf16)[0].name_expression,
              "ktune::flash_decode_split<ktune::bf16, 96, 16, 64, 4, 3, false, 0, false, false, "
              "false, false, 1, " + std::to_string(d) + ", true>");
  }
  const Problem d128 = op().parse_problem("b=4,hq=32,hkv=8,nq=1,nk=4096,d=128");
  EXPECT_EQ(op().invalid_reason(split, d128, DType::bf16, h100).value_or(""),
            "kv_split=1 is for d=96's tiles (head dims 72 to 96), not d=128's");
  // The varlen kernels too (since they swizzle their K/V rows as well: stop 54).
  const Problem varlen = op().parse_problem("b=4,hq=32,hkv=8,nq=1,nk=4096,d=96,varlen=yes");
  EXPECT_EQ(op().invalid_reason(split, varlen, DType::bf16, h100), std::nullopt);
  // 192-byte rows instead of 208: the same tile takes less shared memory.
  const Params padded = op().parse_params("splits=1,block_m=16,block_n=64,warps=4,stages=3");
  const Problem d96 = op().parse_problem("b=4,hq=32,hkv=8,nq=1,nk=4096,d=96");
  EXPECT_EQ(op().dynamic_shared_bytes(padded, d96, DType::bf16, 0) -
                op().dynamic_shared_bytes(split, d96, DType::bf16, 0),
            3u * 2 * 64 * 16);
}

// kv_split=1 compiles without spills where the space holds it, sampled: four of its tiles
// (block_m, block_n, warps, stages) each for d=80, d=96 paged and causal, d=88 with every mask
// variant and d=80 varlen, and a cluster merge, for sm_80 and sm_90a (each beside kv_split=0's
// same tile).
TEST(DecodeSplit96, KernelsCompileWithoutSpills) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  const auto add = [&](const std::vector<KernelSource>& ks, const std::string& arch) {
    if (seen.insert({arch, ks[0].name_expression}).second) jobs.push_back({ks[0], arch, {}});
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (const char* shape : {"b=16,hq=32,hkv=32,nq=1,nk=4096,d=80",
                              "b=4,hq=32,hkv=8,nq=5,nk=4096,d=96,causal=yes,page=16",
                              "b=4,hq=32,hkv=8,nq=1,nk=4096,d=88,causal=yes,window=700,softcap=yes,"
                              "alibi=yes",
                              "b=4,hq=32,hkv=8,nq=3,nk=4096,d=80,varlen=yes"}) {
      const Problem p = op().parse_problem(shape);
      std::vector<Params> tiles;  // kv_split=1 at one split count: one point per tile
      for (const Params& v : Space(op(), p, DType::bf16, dev).valid_points())
        if (v.values[kv_split_index()] == 1 && v.values[0] == 4) tiles.push_back(v);
      ASSERT_GE(tiles.size(), 4u) << shape;
      for (std::size_t i = 0; i < 4; ++i) {
        const Params& v = tiles[i * (tiles.size() - 1) / 3];
        Params zero = v;
        zero.values[kv_split_index()] = 0;
        add(op().kernels(v, p, DType::bf16), arch);
        add(op().kernels(zero, p, DType::bf16), arch);
      }
    }
    if (std::string(arch) == "sm_90a") {
      const Problem p = op().parse_problem("b=1,hq=64,hkv=8,nq=1,nk=32768,d=96");
      add(op().kernels(op().parse_params(
                           "splits=8,block_m=16,block_n=64,warps=4,stages=3,merge=1,kv_split=1"),
                       p, DType::f16),
          arch);
    }
  }
  ASSERT_GT(jobs.size(), 8u);
  test::compile_and_check(jobs, [](const CompileJob& job, const CompiledKernel& k) {
    EXPECT_EQ(k.resources.spill_stores, 0) << job.arch << " " << job.source.name_expression;
  });
}

// ---- NVRTC: the paged kernels and the new fill kernels compile ----

TEST(DecodePaged, PagedKernelsAndFillsCompile) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  std::vector<bool> is_default;
  const auto add = [&](const KernelSource& k, const std::string& arch, bool def) {
    if (seen.insert({arch, k.name_expression}).second) {
      jobs.push_back({k, arch, {}});
      is_default.push_back(def);
    }
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    // d = 32, 96 and 80 (in d=96's tiles) sampled: one batch shape, bf16. d=96's paged copies
    // once failed to compile ("whole rows per pass": 12 chunks a row), unseen while only the
    // tiles of a power-of-two d were compiled here.
    for (std::int64_t d : {32, 64, 80, 96, 128, 256})
      for (int page : {16, 256})
        for (const char* dims : {"b=64,hq=32,hkv=8,nq=1,nk=8000", "b=1,hq=64,hkv=8,nq=1,nk=32768",
                                 "b=4,hq=32,hkv=8,nq=16,nk=4096"})
          for (DType t : {DType::bf16, DType::f16}) {
            const bool sampled = d == 32 || d == 80 || d == 96;
            if (sampled && (t != DType::bf16 || std::string(dims).rfind("b=64,", 0) != 0))
              continue;
            const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                                 ",page=" + std::to_string(page) +
                                                 (t == DType::f16 ? ",causal=yes" : ""));
            for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t))
              add(k, arch, true);
            for (const KernelSource& k : op().reference_kernels(p, t)) add(k, arch, false);
          }
    // Pages smaller than, equal to and larger than the tile.
    const Problem p = op().parse_problem("b=2,hq=16,hkv=2,nq=5,nk=4096,d=128,page=32");
    for (const char* params : {"splits=4,block_m=16,block_n=128,warps=4,stages=2",
                               "splits=4,block_m=16,block_n=32,warps=2,stages=4"})
      for (const KernelSource& k : op().kernels(op().parse_params(params), p, DType::bf16))
        add(k, arch, false);
    add({"common/check.cuh", "ktune::fill_permutation_kernel"}, arch, false);
    add({"common/check.cuh", "ktune::fill_uniform_int_kernel"}, arch, false);
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%s %-6s %-72s %3d registers, stack %d, spills %d/%d\n",
                is_default[i] ? "default" : "other  ", jobs[i].arch.c_str(), expr.c_str(),
                r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    if (is_default[i]) {
      EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
    } else {
      EXPECT_LE(r.spill_stores, 64) << jobs[i].arch << " " << expr;
    }
  }
}

// ---- mask variants: sliding window, logit soft-capping, ALiBi ----

TEST(DecodeVariants, DimsAndKeys) {
  const std::vector<DimSpec>& dims = op().dims();
  ASSERT_EQ(dims.size(), 12u);
  const char* names[] = {"b", "hq", "hkv", "nq", "nk", "d", "causal", "page", "window", "softcap",
                         "alibi", "varlen"};
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(dims[i].name, names[i]);
  // As flash_attention's: the window by distance with no window (0) a regime of its own,
  // softcap and alibi exact; all off by default and left out of keys when off.
  EXPECT_FALSE(dims[8].matched_exactly());
  EXPECT_EQ(dims[8].regime(0), 0);
  EXPECT_EQ(dims[8].regime(1), 1);
  EXPECT_EQ(dims[8].regime(4096), dims[8].regime(8192));
  EXPECT_TRUE(dims[9].matched_exactly());
  EXPECT_TRUE(dims[10].matched_exactly());
  for (std::size_t i = 8; i < 11; ++i) {
    EXPECT_EQ(dims[i].def, 0) << dims[i].name;
    EXPECT_FALSE(dims[i].keyed_at_default) << dims[i].name;
  }

  // Keys written before the variants (contiguous and paged) are the same problems, with the
  // same keys.
  for (const char* old : {"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no",
                          "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes",
                          "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,causal=no,page=16"}) {
    const Problem p = op().parse_problem(old);
    ASSERT_EQ(p.values.size(), 12u);
    EXPECT_EQ(std::vector<std::int64_t>(p.values.begin() + 8, p.values.end()),
              (std::vector<std::int64_t>{0, 0, 0, 0}));
    EXPECT_EQ(op().problem_key(p), old);
    EXPECT_EQ(op().parse_problem(std::string(old) + ",window=0,softcap=no,alibi=no"), p);
  }
  EXPECT_EQ(op().problem_key(op().default_problem()),
            "b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no");

  // With variants the key shows them, in declared order, whatever order they were given in.
  const Problem v = op().parse_problem(
      "alibi=yes,window=4096,b=1,hq=8,hkv=2,nq=3,nk=9000,d=64,softcap=yes,page=32,causal=yes");
  EXPECT_EQ(v.values, (std::vector<std::int64_t>{1, 8, 2, 3, 9000, 64, 1, 32, 4096, 1, 1, 0}));
  EXPECT_EQ(op().problem_key(v),
            "b=1,hq=8,hkv=2,nq=3,nk=9000,d=64,causal=yes,page=32,window=4096,softcap=yes,"
            "alibi=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(v)), v);
  EXPECT_EQ(op().problem_key(op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,softcap=yes")),
            "b=1,hq=8,hkv=8,nq=1,nk=100,d=64,causal=no,softcap=yes");
  EXPECT_EQ(op().problem_key(op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,alibi=yes")),
            "b=1,hq=8,hkv=8,nq=1,nk=100,d=64,causal=no,alibi=yes");
  // "x" shapes name the integer dims in order; the window is the eighth, after page.
  EXPECT_EQ(op().parse_problem("1x4x4x9x9x32x0x4096"),
            op().parse_problem("b=1,hq=4,hkv=4,nq=9,nk=9,d=32,window=4096"));

  // Bad values say what is allowed; every combination of the variants is a valid problem.
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,window=-1"),
                       "window=-1 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,window=1073741825"),
                       "window=1073741825 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,softcap=30"),
                       "softcap=\"30\" is not one of no, yes"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,alibi=1"),
                       "alibi=\"1\" is not one of no, yes"));
  for (int mask = 1; mask < 8; ++mask)
    for (const char* page : {"", ",page=16", ",page=256"})
      EXPECT_EQ(problem_error(std::string("b=2,hq=8,hkv=2,nq=5,nk=100,d=64,causal=yes") + page +
                              (mask & 1 ? ",window=1" : "") + (mask & 2 ? ",softcap=yes" : "") +
                              (mask & 4 ? ",alibi=yes" : "")),
                "")
          << mask << page;
}

TEST(DecodeVariants, KernelsWithoutVariantsKeepTheirNameExpressions) {
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  const auto exprs = [&](const std::string& shape, DType t = DType::f16) {
    const Problem p = op().parse_problem(shape);
    std::string out;
    for (const KernelSource& k : op().kernels(params, p, t)) out += k.name_expression + " | ";
    return out + op().reference_kernels(p, t)[0].name_expression;
  };
  const std::string base = "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes";
  const std::string split = "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true";
  const std::string combine = "> | ktune::flash_decode_combine<ktune::fp16, 64> | ";
  const std::string fa_ref = "ktune::flash_attention_reference<ktune::fp16, 64, true, ";
  // Off: the name expressions of before the variants (PAGE only when paged); the reference is
  // flash_attention's, paged with its PAGE flag.
  EXPECT_EQ(exprs(base), split + combine + fa_ref + "false, false, false>");
  EXPECT_EQ(exprs(base + ",page=16"),
            split + ", 16" + combine + fa_ref + "false, false, false, false, 16>");
  // On: PAGE (0 when contiguous) and the three flags; the combine never changes. The contiguous
  // reference is flash_attention's with the same flags.
  EXPECT_EQ(exprs(base + ",window=4096"),
            split + ", 0, true, false, false" + combine + fa_ref + "true, false, false>");
  EXPECT_EQ(exprs(base + ",softcap=yes"),
            split + ", 0, false, true, false" + combine + fa_ref + "false, true, false>");
  EXPECT_EQ(exprs(base + ",alibi=yes"),
            split + ", 0, false, false, true" + combine + fa_ref + "false, false, true>");
  EXPECT_EQ(exprs(base + ",window=600,softcap=yes,alibi=yes"),
            split + ", 0, true, true, true" + combine + fa_ref + "true, true, true>");
  EXPECT_EQ(exprs(base + ",page=16,window=7,alibi=yes"),
            split + ", 16, true, false, true" + combine + fa_ref + "true, false, true, false, 16>");
  EXPECT_EQ(exprs(base + ",page=256,softcap=yes"),
            split + ", 256, false, true, false" + combine + fa_ref +
                "false, true, false, false, 256>");
  // The contiguous reference is exactly flash_attention's for the same problem.
  const Op& fa = get_op("flash_attention");
  const std::string shape = base + ",window=4096,softcap=yes,alibi=yes";
  EXPECT_EQ(op().reference_kernels(op().parse_problem(shape), DType::bf16),
            fa.reference_kernels(fa.parse_problem(shape), DType::bf16));
  // Soft-capping and ALiBi change neither the space nor the defaults (contiguous and paged);
  // a paged window neither (its splits divide each sequence from key 0). A contiguous window
  // does: its splits divide only the keys in its reach (DecodeVariants.WindowSplitsCoverIt).
  const DeviceInfo h100 = device("sm_90a");
  for (const char* extra :
       {",softcap=yes,alibi=yes", ",page=16,window=512,softcap=yes,alibi=yes"}) {
    const std::string page = std::string(extra).find("page") != std::string::npos ? ",page=16"
                                                                                  : "";
    const Problem plain = op().parse_problem(std::string(kBar1) + page);
    const Problem variants = op().parse_problem(std::string(kBar1) + extra);
    EXPECT_EQ(Space(op(), plain, DType::bf16, h100).valid_count(),
              Space(op(), variants, DType::bf16, h100).valid_count());
    EXPECT_EQ(op().default_params(plain, DType::bf16, h100),
              op().default_params(variants, DType::bf16, h100));
    EXPECT_EQ(op().workspace_bytes(op().default_params(plain, DType::bf16, h100), plain,
                                   DType::bf16),
              op().workspace_bytes(op().default_params(plain, DType::bf16, h100), variants,
                                   DType::bf16));
  }
}

// Contiguous K/V with a window much shorter than the cache: the splits divide the keys in the
// window's reach (from the first tile any row sees), so each split has work, instead of
// dividing all nk and leaving most splits left of every window.
TEST(DecodeVariants, WindowSplitsCoverIt) {
  const DeviceInfo h100 = device("sm_90a");
  // Bar 2 (one sequence, 8 KV heads, 32768 keys) with a 4096-key window: 16 splits either way
  // (one CTA per SM), 4 tiles of 64 keys each from tile 448 instead of 32 from tile 0.
  const Problem plain = op().parse_problem(kBar2);
  const Problem window = op().parse_problem(std::string(kBar2) + ",window=4096");
  const Params p = op().default_params(plain, DType::bf16, h100);
  const Params w = op().default_params(window, DType::bf16, h100);
  EXPECT_EQ(op().params_key(w), op().params_key(p));
  const auto tiles_per_split = [&](const Problem& problem, const Params& params) {
    return run(params, problem).args[0].tiles_per_split;
  };
  EXPECT_EQ(tiles_per_split(plain, p), 32);
  EXPECT_EQ(tiles_per_split(window, w), 4);
  EXPECT_EQ(flash_decode_window_base(1, 32768, 4096, 64), 448);
  // A window shorter than a split's worth of keys: fewer splits, none empty.
  const Problem narrow = op().parse_problem(std::string(kBar2) + ",window=300");
  const Params n = op().default_params(narrow, DType::bf16, h100);
  EXPECT_EQ(op().param(n, "splits"), 1);
  EXPECT_EQ(op().invalid_reason(n, narrow, DType::bf16, h100), std::nullopt);
  Params many = n;
  many.values[op().param_index("splits")] = 16;
  EXPECT_TRUE(contains(op().invalid_reason(many, narrow, DType::bf16, h100).value_or(""),
                       "in reach of the window"));
  // No window, or one covering the whole cache: the splits divide all nk, as before.
  EXPECT_EQ(flash_decode_window_base(1, 32768, 0, 64), 0);
  EXPECT_EQ(flash_decode_window_base(1, 32768, 40000, 64), 0);
}

TEST(DecodeVariants, TensorsScalarsBytesAndFlops) {
  for (const char* page : {"", ",page=32"}) {
    const std::string shape = std::string("b=3,hq=16,hkv=4,nq=2,nk=1000,d=64") + page;
    const Problem off = op().parse_problem(shape);
    const Problem on = op().parse_problem(shape + ",alibi=yes");
    const std::vector<TensorSpec> ts = op().tensors(off, DType::bf16);
    // Last: after lse (flash_attention's index 5), or paged after seq_lens.
    ASSERT_EQ(ts.size(), *page ? 8u : 6u);
    const TensorSpec& slopes = ts.back();
    EXPECT_EQ(slopes.name, "alibi_slopes");
    EXPECT_EQ(slopes.role, TensorRole::input);
    EXPECT_EQ(slopes.dtype, DType::f32);
    EXPECT_EQ(slopes.elements, 16);
    EXPECT_TRUE(slopes.optional);
    EXPECT_EQ(slopes.fill.kind, Fill::Kind::uniform);
    EXPECT_GT(slopes.fill.lo, 0.f);
    EXPECT_LE(slopes.fill.hi, 1.f);
    EXPECT_FALSE(op().tensors(on, DType::bf16).back().optional);
    // The other variants add no tensor; the slopes' bytes count only when read.
    EXPECT_EQ(op().tensors(op().parse_problem(shape + ",window=9,softcap=yes"), DType::bf16).size(),
              ts.size());
    EXPECT_DOUBLE_EQ(op().min_bytes(on, DType::bf16) - op().min_bytes(off, DType::bf16), 4.0 * 16);
  }
  // The cap is flash_attention's second scalar, 50 when tuning.
  ASSERT_EQ(op().scalars().size(), 2u);
  EXPECT_EQ(op().scalars()[1].name, "softcap");
  EXPECT_DOUBLE_EQ(op().scalars()[1].tuning_value, 50.0);
  // A window bounds the keys each row sees: flash_attention's count for the same problem, and
  // paged (nk keys per sequence, an upper bound) the contiguous one's.
  const Op& fa = get_op("flash_attention");
  const std::string w = "b=2,hq=8,hkv=2,nq=16,nk=4096,d=128,causal=yes,window=1000";
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w), DType::bf16),
                   fa.flops(fa.parse_problem(w), DType::bf16));
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w), DType::bf16), 4.0 * 2 * 8 * 128 * 16 * 1000);
  EXPECT_DOUBLE_EQ(op().flops(op().parse_problem(w + ",page=16"), DType::bf16),
                   op().flops(op().parse_problem(w), DType::bf16));
}

TEST(DecodeVariants, ArgumentsReachTheKernelsAndTheReferences) {
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  const std::string base = "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes";
  // Variants off: the cap and the slopes are not read (an invalid cap, a null pointer).
  for (const char* page : {"", ",page=16"}) {
    const Problem off = op().parse_problem(base + page);
    const FlashDecodeArgs a = *page ? run_paged(params, off, nullptr, 0x60000, -1.0, 0).args[0]
                                    : run(params, off, 0x100000, 0.0, nullptr, -1.0, 0).args[0];
    EXPECT_EQ(a.window, 0);
    EXPECT_EQ(a.softcap, 0.f);
    EXPECT_EQ(a.alibi_slopes, nullptr);
  }
  // Contiguous: the slopes are tensor 5 (flash_attention's), the cap scalar 1.
  const Problem all = op().parse_problem(base + ",window=77,softcap=yes,alibi=yes");
  const RecordingLauncher<FlashDecodeArgs> l = run(params, all, 0x100000, 0.0, nullptr, 30.0);
  ASSERT_EQ(l.args.size(), 2u);
  for (const FlashDecodeArgs& a : l.args) {  // the split kernel and the combine
    EXPECT_EQ(a.window, 77);
    EXPECT_FLOAT_EQ(a.softcap, 30.f);
    EXPECT_EQ(a.alibi_slopes, reinterpret_cast<const float*>(0x60000));
  }
  EXPECT_TRUE(contains(run_error([&] { run(params, all, 0x100000, 0.0, nullptr, 0.0); }),
                       "flash_decode: softcap 0.000000 must be a positive finite cap with "
                       "softcap=yes"));
  EXPECT_TRUE(contains(run_error([&] {
                         run(params, all, 0x100000, 0.0, nullptr,
                             std::numeric_limits<double>::infinity());
                       }),
                       "must be a positive finite cap"));
  EXPECT_TRUE(contains(run_error([&] { run(params, all, 0x100000, 0.0, nullptr, 30.0, 0); }),
                       "flash_decode: alibi=yes needs the alibi_slopes tensor ([hq] fp32)"));
  // Paged: the slopes are tensor 7, after the block table and the lengths.
  const Problem paged = op().parse_problem(base + ",page=16,window=77,softcap=yes,alibi=yes");
  const FlashDecodeArgs p = run_paged(params, paged, nullptr, 0x60000, 30.0).args[0];
  EXPECT_EQ(p.window, 77);
  EXPECT_FLOAT_EQ(p.softcap, 30.f);
  EXPECT_EQ(p.alibi_slopes, reinterpret_cast<const float*>(0x80000));
  EXPECT_EQ(p.block_table, reinterpret_cast<const int*>(0x60000));
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, paged, nullptr, 0x60000, 30.0, 0); }),
                       "alibi=yes needs the alibi_slopes tensor"));
  EXPECT_TRUE(contains(run_error([&] { run_paged(params, paged, nullptr, 0x60000, -2.0); }),
                       "softcap -2.000000 must be a positive finite cap"));

  // The references get the same: flash_attention's (contiguous) reads tensor 5 and scalar 1,
  // the paged one tensor 7 and scalar 1.
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {0.0, 30.0};
  {
    const std::uint64_t tensors[6] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000};
    RunArgs a;
    a.problem = &all;
    a.tensors = tensors;
    a.scalars = scalars;
    a.kernels = &kernel;
    RecordingLauncher<FlashAttentionArgs> r;
    op().run_reference(a, r);
    ASSERT_EQ(r.args.size(), 1u);
    EXPECT_EQ(r.args[0].window, 77);
    EXPECT_FLOAT_EQ(r.args[0].softcap, 30.f);
    EXPECT_EQ(r.args[0].alibi_slopes, reinterpret_cast<const float*>(0x60000));
  }
  {
    const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                      0x50000, 0x60000, 0x70000, 0x80000};
    RunArgs a;
    a.problem = &paged;
    a.tensors = tensors;
    a.scalars = scalars;
    a.kernels = &kernel;
    RecordingLauncher<FlashAttentionArgs> r;  // flash_attention's reference, paged
    op().run_reference(a, r);
    ASSERT_EQ(r.args.size(), 1u);
    EXPECT_EQ(r.args[0].window, 77);
    EXPECT_FLOAT_EQ(r.args[0].softcap, 30.f);
    EXPECT_EQ(r.args[0].alibi_slopes, reinterpret_cast<const float*>(0x80000));
    EXPECT_EQ(r.args[0].seq_lens, reinterpret_cast<const int*>(0x70000));
  }
}

/// The key tiles flash_decode_split takes for one CTA (packed rows [r0, r0 + rows) of a sequence
/// of `len` keys, split `split` of `per` tiles), computed as the kernel computes them:
/// [start, low) masked (left of the last row's window), [low, full) unmasked, [full, end) masked.
/// start >= end: the split has no key for these rows. ran = false: the CTA exits at once
/// (paged, a split past the sequence's end).
struct KernelTiles {
  long long start = 0, low = 0, full = 0, end = 0;
  bool ran = true;
};

KernelTiles kernel_tiles(long long len, long long nq, long long group, long long r0,
                         long long rows, long long block_n, long long split, long long per,
                         bool causal, long long window, bool paged) {
  KernelTiles k;
  const long long tiles = (len + block_n - 1) / block_n;
  // Contiguous with a window, the splits divide the tiles from the first one any row sees.
  const long long base =
      paged ? 0 : flash_decode_window_base(nq, len, window, static_cast<int>(block_n));
  const long long begin = base + split * per;
  if (paged && split > 0 && begin >= tiles) {
    k.ran = false;
    return k;
  }
  k.end = std::min(tiles, begin + per);
  k.full = len / block_n;
  if (causal) {
    const long long last = flash_decode_row_limit(r0 + rows - 1, group, nq, len, true);
    k.end = std::min(k.end, last <= 0 ? 0 : (last + block_n - 1) / block_n);
    const long long first = flash_decode_row_limit(r0, group, nq, len, true);
    k.full = first <= 0 ? 0 : first / block_n;
  }
  k.start = k.low = begin;
  if (window > 0) {
    const long long first_lo = flash_decode_row_first(r0, group, nq, len, window);
    const long long last_lo = flash_decode_row_first(r0 + rows - 1, group, nq, len, window);
    k.start = std::max(begin, first_lo <= 0 ? 0 : first_lo / block_n);
    k.low = std::max(k.start,
                     std::min(k.end, last_lo <= 0 ? 0 : (last_lo + block_n - 1) / block_n));
  }
  k.full = std::max(k.low, std::min(k.full, k.end));
  return k;
}

/// Softmax attention of one query over `keys` (rows of k and v) with scores `score(j, q . k_j)`.
Partial attend_keys(const std::vector<double>& q, const std::vector<std::vector<double>>& k,
                    const std::vector<std::vector<double>>& v, const std::vector<long long>& keys,
                    const std::function<double(long long, double)>& score) {
  Partial p;
  p.o.assign(q.size(), 0.0);
  if (keys.empty()) return p;
  std::vector<double> s;
  double m = -std::numeric_limits<double>::infinity();
  for (long long j : keys) {
    double x = 0;
    for (std::size_t i = 0; i < q.size(); ++i) x += q[i] * k[static_cast<std::size_t>(j)][i];
    s.push_back(score(j, x));
    m = std::max(m, s.back());
  }
  double l = 0;
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const double e = std::exp(s[n] - m);
    l += e;
    for (std::size_t i = 0; i < q.size(); ++i)
      p.o[i] += e * v[static_cast<std::size_t>(keys[n])][i];
  }
  for (double& x : p.o) x /= l;
  p.lse = m + std::log(l);
  return p;
}

// For every CTA and split: the keys the kernel scores (its tiles, each unmasked tile whole, the
// masked ones filtered by the row's causal limit and window start) are exactly the row's visible
// keys, each once; splits left of every row's window score none and merge with weight 0; with
// soft-capping and ALiBi (the packed row's head's slope) the splits' partials merged by the
// combine equal plain attention. Contiguous and paged (per-sequence lengths, splits past the end
// exiting as the combine skips them).
TEST(DecodeVariants, WindowTilesSplitsAndCombineMatchPlainAttention) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const std::size_t d = 4;
  const double scale = 0.7, cap = 1.5;
  const long long block_m = 16;
  int checked = 0, config = 0, empty_splits = 0, skipped_tiles = 0;
  for (long long nk : {1LL, 17LL, 100LL, 333LL})
    for (long long nq : {1LL, 5LL, 17LL})
      for (long long group : {1LL, 3LL})
        for (long long block_n : {32LL, 64LL})
          for (int splits : {1, 2, 3, 5}) {
            if (flash_decode_used_splits(nk, static_cast<int>(block_n), splits) != splits)
              continue;
            std::vector<std::vector<double>> k(static_cast<std::size_t>(nk),
                                               std::vector<double>(d));
            std::vector<std::vector<double>> v = k;
            for (auto* rows : {&k, &v})
              for (auto& row : *rows)
                for (double& x : row) x = u(rng);
            std::vector<double> slopes(static_cast<std::size_t>(group));
            for (double& x : slopes) x = 0.05 + 0.2 * (u(rng) + 2.0);
            for (bool causal : {false, true})
              for (long long window : {1LL, 7LL, 60LL, 1000LL})
                for (long long len : {nk, (nk + 1) / 2, 1LL}) {
                  const bool paged = len != nk || config % 2 == 1;
                  const bool softcap = config % 4 >= 2, alibi = config % 3 != 0;
                  ++config;
                  // Contiguous: the host divides the keys from the window's first tile
                  // (split_span in decode_op.cpp), and a point with an empty split is invalid.
                  const long long span =
                      paged ? nk
                            : nk - flash_decode_window_base(nq, nk, window,
                                                            static_cast<int>(block_n)) *
                                       block_n;
                  if (flash_decode_used_splits(span, static_cast<int>(block_n), splits) != splits)
                    continue;
                  const long long per =
                      flash_decode_tiles_per_split(span, static_cast<int>(block_n), splits);
                  const long long rows = flash_decode_rows(group, nq);
                  for (long long r0 = 0; r0 < rows; r0 += block_m) {
                    const long long tile_rows = std::min(block_m, rows - r0);
                    std::vector<KernelTiles> ranges;
                    for (int s = 0; s < splits; ++s) {
                      ranges.push_back(kernel_tiles(len, nq, group, r0, tile_rows, block_n, s,
                                                    per, causal, window, paged));
                      // Left of the window: a split with tiles of its own takes none, or
                      // starts past its first.
                      const KernelTiles& t = ranges.back();
                      const long long begin = (nk - span) / block_n + s * per;
                      if (t.ran && begin < t.end && t.start >= t.end) ++empty_splits;
                      if (t.ran && begin < t.start && t.start < t.end) ++skipped_tiles;
                    }
                    // The combine reads the splits that hold keys of the sequence; the kernel
                    // exits exactly for the others.
                    const int used =
                        flash_decode_splits_used(static_cast<int>(len),
                                                 static_cast<int>(per * block_n), splits);
                    for (int s = 0; s < splits; ++s)
                      ASSERT_EQ(ranges[static_cast<std::size_t>(s)].ran, !paged || s < used)
                          << nk << " " << len << " " << s;
                    for (long long r = r0; r < r0 + tile_rows; ++r) {
                      const long long aligned = r / group + len - nq;
                      const long long limit = flash_decode_row_limit(r, group, nq, len, causal);
                      const long long first =
                          std::max(0LL, flash_decode_row_first(r, group, nq, len, window));
                      const double slope = slopes[static_cast<std::size_t>(r % group)];
                      const auto score = [&](long long j, double dot) {
                        double x = scale * dot;
                        if (softcap) x = cap * std::tanh(x / cap);
                        if (alibi) x -= slope * static_cast<double>(std::llabs(j - aligned));
                        return x;
                      };
                      std::vector<double> q(d);
                      for (double& x : q) x = u(rng);
                      std::vector<long long> visible;
                      for (long long j = first; j < limit; ++j) visible.push_back(j);
                      const Partial full = attend_keys(q, k, v, visible, score);
                      std::vector<long long> scored;
                      std::vector<Partial> parts;
                      for (int s = 0; s < (paged ? used : splits); ++s) {
                        const KernelTiles& t = ranges[static_cast<std::size_t>(s)];
                        std::vector<long long> keys;
                        for (long long n = t.start; n < t.end; ++n) {
                          const bool masked = n < t.low || n >= t.full;
                          for (long long j = n * block_n; j < (n + 1) * block_n; ++j)
                            if (!masked || (j < limit && j >= first)) keys.push_back(j);
                        }
                        scored.insert(scored.end(), keys.begin(), keys.end());
                        parts.push_back(attend_keys(q, k, v, keys, score));
                      }
                      ASSERT_EQ(scored, visible)
                          << "nk=" << nk << " len=" << len << " nq=" << nq << " g=" << group
                          << " bn=" << block_n << " splits=" << splits << " causal=" << causal
                          << " window=" << window << " row=" << r;
                      const Partial combined = merge(parts, d);
                      if (std::isinf(full.lse)) {
                        EXPECT_TRUE(std::isinf(combined.lse) && combined.lse < 0);
                      } else {
                        EXPECT_NEAR(combined.lse, full.lse, 1e-12);
                      }
                      for (std::size_t i = 0; i < d; ++i)
                        ASSERT_NEAR(combined.o[i], full.o[i], 1e-12);
                      ++checked;
                    }
                  }
                }
          }
  EXPECT_GT(checked, 20000);
  EXPECT_GT(empty_splits, 100);   // splits wholly left of the window write weight 0
  EXPECT_GT(skipped_tiles, 100);  // and others start past their first tiles
}

// NVRTC: the default kernels of the combinations of the variants (contiguous and paged, decode
// and a 16-row query block, d = 64, 128, 256, bf16 without and fp16 with the causal mask; all
// three variants everywhere, the others sampled) compile for sm_80 and sm_90a and keep everything
// in registers; their references compile.
TEST(DecodeVariants, EveryCombinationsDefaultsCompileWithoutSpills) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  std::vector<bool> is_default;
  const auto add = [&](const KernelSource& k, const std::string& arch, bool def) {
    if (seen.insert({arch, k.name_expression}).second) {
      jobs.push_back({k, arch, {}});
      is_default.push_back(def);
    }
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (int mask = 1; mask < 8; ++mask) {
      const std::string variants = std::string(mask & 1 ? ",window=1000" : "") +
                                   (mask & 2 ? ",softcap=yes" : "") +
                                   (mask & 4 ? ",alibi=yes" : "");
      for (const char* page : {"", ",page=16"})
        for (std::int64_t d : {64, 128, 256})
          for (const char* dims :
               {"b=1,hq=64,hkv=8,nq=1,nk=32768", "b=1,hq=32,hkv=8,nq=16,nk=8192"})
            for (DType t : {DType::bf16, DType::f16}) {
              // A sample (CI time): all three variants (the most registers) everywhere; each
              // other combination at one (query shape, dtype) per head dim and layout, rotating.
              const int pick = (mask + static_cast<int>(d / 64) + (*page ? 1 : 0)) % 4;
              const int here = (std::string(dims).find("nq=1,") != std::string::npos ? 0 : 2) +
                               (t == DType::f16 ? 1 : 0);
              if (mask != 7 && pick != here) continue;
              const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                                   page + variants +
                                                   (t == DType::f16 ? ",causal=yes" : ""));
              for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t))
                add(k, arch, true);
              // The references (flash attention's, arch-independent code) on one arch only.
              if (dev.cc_major == 9)
                for (const KernelSource& k : op().reference_kernels(p, t)) add(k, arch, false);
            }
    }
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  int defaults = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%s %-6s %-88s %3d registers, stack %d, spills %d/%d\n",
                is_default[i] ? "default" : "ref    ", jobs[i].arch.c_str(), expr.c_str(),
                r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    EXPECT_LE(r.registers, 255) << expr;
    if (is_default[i]) {
      ++defaults;
      EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
      EXPECT_EQ(r.spill_loads, 0) << jobs[i].arch << " " << expr;
    }
  }
  // At least one split kernel per arch, combination, layout and head dim (combines and the two
  // query shapes' kernels coincide in places).
  EXPECT_GE(defaults, 2 * 7 * 2 * 3);
}


// ---- variable-length batches ----

/// Runs a varlen problem with tensors q, k, v, o, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k
/// at 0x10000 * (i + 1) (cu_seqlens_k at `cu_k`), the workspace at 0x100000, scalars scale (0)
/// and softcap (50).
RecordingLauncher<FlashDecodeArgs> run_varlen(const Params& params, const Problem& p,
                                              const std::int64_t* layout = nullptr,
                                              std::uint64_t cu_k = 0x80000) {
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, 0x60000, 0x70000, cu_k};
  return run_with(params, p, tensors, 0x100000, 0.0, layout, 50.0);
}

TEST(DecodeVarlen, DimIsKeyedOnlyWhenOnAndRefusedWithPages) {
  const DimSpec& varlen = op().dims()[11];
  EXPECT_EQ(varlen.name, "varlen");
  EXPECT_EQ(varlen.choices, (std::vector<std::string>{"no", "yes"}));
  EXPECT_TRUE(varlen.matched_exactly());
  EXPECT_EQ(varlen.def.value_or(-1), 0);
  EXPECT_FALSE(varlen.keyed_at_default);
  // Off: keys written before the dim are the same problems with the same keys.
  for (const char* old : {"b=16,hq=32,hkv=8,nq=1,nk=4096,d=128,causal=no",
                          "b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,causal=no,page=16",
                          "b=3,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,window=7,alibi=yes"}) {
    const Problem p = op().parse_problem(old);
    EXPECT_EQ(p.values[11], 0) << old;
    EXPECT_EQ(op().problem_key(p), old);
    EXPECT_EQ(op().parse_problem(std::string(old) + ",varlen=no"), p);
  }
  // On: last in the key, after the variants.
  const Problem v =
      op().parse_problem("varlen=yes,b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes");
  EXPECT_EQ(v.values, (std::vector<std::int64_t>{4, 16, 2, 5, 1000, 64, 1, 0, 0, 1, 0, 1}));
  EXPECT_EQ(op().problem_key(v),
            "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes,varlen=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(v)), v);
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,varlen=1"),
                       "varlen=\"1\" is not one of no, yes"));
  // Paged and varlen: an invalid problem that says why, at every page size; every invalid point
  // of such a problem carries the reason.
  for (int page : {16, 256})
    EXPECT_TRUE(contains(problem_error("b=2,hq=8,hkv=2,nq=1,nk=100,d=64,varlen=yes,page=" +
                                       std::to_string(page)),
                         "varlen=yes with page=" + std::to_string(page) +
                             ": variable-length batches are packed contiguous K/V (page=0)"))
        << page;
  Problem paged;  // parse_problem refuses it: built by hand
  paged.values = {2, 8, 2, 1, 100, 64, 0, 16, 0, 0, 0, 1};
  EXPECT_TRUE(contains(op().invalid_reason(op().parse_params("splits=1,block_m=16,block_n=64,"
                                                             "warps=4,stages=2"),
                                           paged, DType::bf16, device("sm_90a"))
                           .value_or(""),
                       "varlen=yes with page=16"));
  // int32 offsets.
  EXPECT_TRUE(contains(problem_error("b=4,hq=1,hkv=1,nq=1,nk=1073741824,d=64,varlen=yes"),
                       "offsets up to 4294967296 do not fit int32"));
  EXPECT_EQ(problem_error("b=1,hq=1,hkv=1,nq=1,nk=1073741824,d=64,varlen=yes"), "");
  // Every mask variant with varlen is a valid problem.
  for (int mask = 0; mask < 8; ++mask)
    EXPECT_EQ(problem_error(std::string("b=5,hq=8,hkv=2,nq=5,nk=100,d=64,causal=yes,varlen=yes") +
                            (mask & 1 ? ",window=9" : "") + (mask & 2 ? ",softcap=yes" : "") +
                            (mask & 4 ? ",alibi=yes" : "")),
              "")
        << mask;
}

TEST(DecodeVarlen, TensorsInFlashAttentionsOrderSizedByTheTunersLengths) {
  const std::string shape = "b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,causal=yes,varlen=yes";
  const Problem p = op().parse_problem(shape);
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  const char* names[] = {"q", "k", "v", "o", "lse", "alibi_slopes", "cu_seqlens_q",
                         "cu_seqlens_k"};
  ASSERT_EQ(ts.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(ts[i].name, names[i]);
  // flash_attention's eight, in its order (its reference reads them), same dtypes and roles.
  const Op& fa = get_op("flash_attention");
  const std::vector<TensorSpec> fts = fa.tensors(fa.parse_problem(shape), DType::bf16);
  ASSERT_EQ(fts.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(ts[i].name, fts[i].name);
    EXPECT_EQ(ts[i].dtype, fts[i].dtype);
    EXPECT_EQ(ts[i].role, fts[i].role);
    EXPECT_EQ(ts[i].optional, fts[i].optional) << ts[i].name;
    EXPECT_EQ(ts[i].alignment, fts[i].alignment) << ts[i].name;
  }
  for (std::size_t i : {6, 7}) {
    EXPECT_EQ(ts[i].dtype, DType::i32);
    EXPECT_EQ(ts[i].role, TensorRole::input);
    EXPECT_FALSE(ts[i].optional);
    EXPECT_EQ(ts[i].elements, 6);
    EXPECT_EQ(ts[i].alignment, 4u);  // side tensors: 4-byte words
    EXPECT_EQ(ts[i].fill.kind, Fill::Kind::seq_offsets);
  }
  EXPECT_EQ(ts[0].alignment, 0u);  // the op's 16
  // Queries 1..nq, keys 0..nk: the second sequence (one query) has no key.
  EXPECT_EQ(ts[6].fill.first_int, 1);
  EXPECT_EQ(ts[6].fill.last_int, 7);
  EXPECT_EQ(ts[7].fill.first_int, 0);
  EXPECT_EQ(ts[7].fill.last_int, 1000);
  const std::vector<std::int64_t> cq = offsets_of(ts[6].fill, 6), ck = offsets_of(ts[7].fill, 6);
  EXPECT_EQ(cq[1] - cq[0], 7);
  EXPECT_EQ(cq[2] - cq[1], 1);
  EXPECT_EQ(ck[1] - ck[0], 1000);
  EXPECT_EQ(ck[2] - ck[1], 0);
  // The packed tensors hold exactly the tuner's rows (the comparison covers them all).
  EXPECT_EQ(ts[0].elements, cq.back() * 16 * 64);
  EXPECT_EQ(ts[3].elements, ts[0].elements);
  EXPECT_EQ(ts[1].elements, ck.back() * 4 * 64);
  EXPECT_EQ(ts[2].elements, ts[1].elements);
  EXPECT_EQ(ts[4].elements, 16 * cq.back());
  EXPECT_LT(ck.back(), 5 * 1000);
  // Bytes: those tensors (the slopes only with alibi=yes).
  const double e = 2.0;
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   e * static_cast<double>(2 * ts[0].elements + 2 * ts[1].elements) +
                       4.0 * static_cast<double>(ts[4].elements + 2 * 6));
  // Flops over the real (query, key) pairs of each sequence, bottom-right causal.
  double pairs = 0.0;
  for (std::size_t i = 0; i + 1 < cq.size(); ++i) {
    const std::int64_t nq = cq[i + 1] - cq[i], nk = ck[i + 1] - ck[i];
    for (std::int64_t r = 0; r < nq; ++r)
      pairs += static_cast<double>(std::clamp<std::int64_t>(r + nk - nq + 1, 0, nk));
  }
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 16 * 64 * pairs);
  const Problem plain = op().parse_problem("b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,varlen=yes");
  double all = 0.0;
  for (std::size_t i = 0; i + 1 < cq.size(); ++i)
    all += static_cast<double>((cq[i + 1] - cq[i]) * (ck[i + 1] - ck[i]));
  EXPECT_DOUBLE_EQ(op().flops(plain, DType::bf16), 4.0 * 16 * 64 * all);
  // Off: the tensors and counts of before.
  const Problem off = op().parse_problem("b=5,hq=16,hkv=4,nq=7,nk=1000,d=64,causal=yes");
  EXPECT_EQ(op().tensors(off, DType::bf16).size(), 6u);
  EXPECT_EQ(op().tensors(off, DType::bf16)[0].elements, 5 * 16 * 7 * 64);
}

TEST(DecodeVarlen, LaunchesSizedFromTheUpperBounds) {
  const Problem p = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,varlen=yes");
  const Problem fixed = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes");
  const Params params = op().parse_params("splits=3,block_m=32,block_n=64,warps=2,stages=4");
  EXPECT_EQ(why("splits=3,block_m=32,block_n=64,warps=2,stages=4", op().problem_key(p)), "");
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_decode_split<ktune::fp16, 64, 32, 64, 2, 4, true, 0, false, false, "
            "false, true>");
  EXPECT_EQ(ks[1].name_expression, "ktune::flash_decode_combine<ktune::fp16, 64>");
  const Problem masks = op().parse_problem(
      "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,window=9,alibi=yes,varlen=yes");
  EXPECT_EQ(op().kernels(params, masks, DType::bf16)[0].name_expression,
            "ktune::flash_decode_split<ktune::bf16, 64, 32, 64, 2, 4, true, 0, true, false, true, "
            "true>");
  // Workspace, shared memory and the space: those of the same problem without varlen (K/V rows
  // swizzled, unpadded, as the fixed kernel's: flash_decode_kv_swizzled).
  EXPECT_EQ(op().workspace_bytes(params, p, DType::f16),
            op().workspace_bytes(params, fixed, DType::f16));
  EXPECT_EQ(op().dynamic_shared_bytes(params, p, DType::f16, 0),
            op().dynamic_shared_bytes(params, fixed, DType::f16, 0));
  // But for d=128 at 64 keys per warp, where varlen keeps the padded rows (the swizzle spilled
  // there): 272 bytes a row against 256, 2 stages x (K + V) x 128 rows x 16 bytes more.
  {
    const Problem v128 = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=128,varlen=yes");
    const Problem f128 = op().parse_problem("b=4,hq=16,hkv=2,nq=5,nk=1000,d=128");
    for (const char* text : {"splits=2,block_m=16,block_n=128,warps=2,stages=2",
                             "splits=2,block_m=16,block_n=128,warps=4,stages=2"}) {
      const Params q = op().parse_params(text);
      const unsigned extra = std::string(text).find("warps=2") != std::string::npos
                                 ? 2u * 2u * 128u * 16u : 0u;
      EXPECT_EQ(op().dynamic_shared_bytes(q, v128, DType::bf16, 0),
                op().dynamic_shared_bytes(q, f128, DType::bf16, 0) + extra) << text;
    }
    EXPECT_FALSE(flash_decode_kv_swizzled(128, true, 64));
    EXPECT_TRUE(flash_decode_kv_swizzled(128, true, 32));
    EXPECT_TRUE(flash_decode_kv_swizzled(64, true, 64));
    EXPECT_TRUE(flash_decode_kv_swizzled(128, false, 64));
    // d=256 at 32 keys per warp keeps its padded rows (varlen or not), d=96 always; d=32's
    // 64-byte rows swizzle (flash_decode_row64_offset).
    for (bool varlen : {false, true}) {
      EXPECT_TRUE(flash_decode_kv_swizzled(256, varlen, 16));
      EXPECT_FALSE(flash_decode_kv_swizzled(256, varlen, 32));
      EXPECT_FALSE(flash_decode_kv_swizzled(96, varlen, 16));
      EXPECT_TRUE(flash_decode_kv_swizzled(32, varlen, 64));
    }
    EXPECT_EQ(flash_decode_kv_pitch(256, false, false, 32), flash_decode_pitch(256));
    EXPECT_EQ(flash_decode_kv_pitch(256, false, false, 16), 512);
  }
  // (merge=1 is contiguous and fixed-length only: the varlen space is the fixed one's merge=0 half.)
  const auto merged = [](const Params& v) { return v.values[5] == 1; };
  const std::vector<Params> fixed_valid = Space(op(), fixed, DType::bf16, device("sm_90a")).valid_points();
  EXPECT_EQ(Space(op(), p, DType::bf16, device("sm_90a")).valid_count(),
            fixed_valid.size() - static_cast<std::size_t>(std::count_if(
                                     fixed_valid.begin(), fixed_valid.end(), merged)));

  // The grids are the fixed problem's: b * hkv CTAs of ceil(g * nq / block_m) row tiles and
  // `splits` splits, the combine one warp per (b, h, row) at the longest lengths; nothing read
  // back on the host.
  const RecordingLauncher<FlashDecodeArgs> l = run_varlen(params, p);
  const RecordingLauncher<FlashDecodeArgs> f = run(params, fixed);
  ASSERT_EQ(l.launches.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    for (int x = 0; x < 3; ++x) EXPECT_EQ(l.launches[i].grid[x], f.launches[i].grid[x]) << i;
    EXPECT_EQ(l.launches[i].block[0], f.launches[i].block[0]);
    EXPECT_EQ(l.launches[i].shared_bytes, f.launches[i].shared_bytes);
    EXPECT_EQ(l.launches[i].programmatic, f.launches[i].programmatic);
  }
  EXPECT_EQ(l.launches[0].grid[0], 2u);  // 8 heads per group x 5 rows, tiles of 32
  EXPECT_EQ(l.launches[0].grid[1], 3u);
  EXPECT_EQ(l.launches[0].grid[2], 8u);
  EXPECT_EQ(l.launches[1].grid[0], (4u * 16 * 5 + 3) / 4);
  const FlashDecodeArgs& a = l.args[0];
  EXPECT_EQ(a.cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(a.cu_seqlens_k, reinterpret_cast<const int*>(0x80000));
  EXPECT_EQ(a.alibi_slopes, nullptr);  // alibi=no: not read
  EXPECT_EQ(a.block_table, nullptr);
  EXPECT_EQ(a.seq_lens, nullptr);
  // Packed [total, h, d]: no batch stride.
  EXPECT_EQ(a.q_batch_stride, 0);
  EXPECT_EQ(a.q_head_stride, 64);
  EXPECT_EQ(a.q_row_stride, 16 * 64);
  EXPECT_EQ(a.k_batch_stride, 0);
  EXPECT_EQ(a.k_head_stride, 64);
  EXPECT_EQ(a.k_row_stride, 2 * 64);
  EXPECT_EQ(a.v_row_stride, 2 * 64);
  EXPECT_EQ(a.o_row_stride, 16 * 64);
  EXPECT_EQ(a.seq_q, 5);
  EXPECT_EQ(a.seq_k, 1000);
  EXPECT_EQ(a.batch, 4);
  EXPECT_EQ(a.tiles_per_split, f.args[0].tiles_per_split);
  EXPECT_EQ(a.split_keys, f.args[0].split_keys);
  EXPECT_EQ(a.part_o, f.args[0].part_o);
  EXPECT_EQ(a.part_lse, f.args[0].part_lse);
  EXPECT_EQ(std::memcmp(&l.args[0], &l.args[1], sizeof a), 0);  // one struct for both kernels
  // A fixed-length problem never sets the offsets (the combine reads them when set).
  EXPECT_EQ(f.args[0].cu_seqlens_q, nullptr);
  EXPECT_EQ(f.args[0].cu_seqlens_k, nullptr);
  // A layout: its head and row strides apply, its batch strides are ignored (not checked).
  std::int64_t layout[12] = {-1, 64, 32 * 64, 7, 64, 4 * 64, 7, 64, 4 * 64, -1, 64, 32 * 64};
  const FlashDecodeArgs b = run_varlen(params, p, layout).args[0];
  EXPECT_EQ(b.q_batch_stride, 0);
  EXPECT_EQ(b.q_row_stride, 32 * 64);
  EXPECT_EQ(b.k_row_stride, 4 * 64);
  EXPECT_EQ(b.o_batch_stride, 0);
  layout[5] = 12;
  EXPECT_TRUE(contains(run_error([&] { run_varlen(params, p, layout); }),
                       "flash_decode: k seq stride 12 must be a positive multiple of 8"));
  EXPECT_TRUE(contains(run_error([&] { run_varlen(params, p, nullptr, 0); }),
                       "flash_decode: varlen=yes needs cu_seqlens_k ([b + 1] int32 row offsets)"));
  // With ALiBi the slopes stay tensor 5, the offsets 6 and 7.
  const FlashDecodeArgs m = run_varlen(params, masks).args[0];
  EXPECT_EQ(m.alibi_slopes, reinterpret_cast<const float*>(0x60000));
  EXPECT_EQ(m.cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(m.window, 9);
}

TEST(DecodeVarlen, ReferenceIsFlashAttentionsVarlen) {
  const std::string shape = "b=4,hq=16,hkv=2,nq=5,nk=1000,d=64,causal=yes,softcap=yes,varlen=yes";
  const Problem p = op().parse_problem(shape);
  const Op& fa = get_op("flash_attention");
  const auto ref = op().reference_kernels(p, DType::bf16);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].name_expression,
            "ktune::flash_attention_reference<ktune::bf16, 64, true, false, true, false, true>");
  EXPECT_EQ(ref, fa.reference_kernels(fa.parse_problem(shape), DType::bf16));
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000,
                                    0x50000, 0x60000, 0x70000, 0x80000};
  const KernelHandle kernel = reinterpret_cast<KernelHandle>(0x100);
  const double scalars[2] = {0.0, 30.0};
  RunArgs a;
  a.problem = &p;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = &kernel;
  RecordingLauncher<FlashAttentionArgs> l;
  op().run_reference(a, l);
  ASSERT_EQ(l.launches.size(), 1u);
  EXPECT_EQ(l.launches[0].grid[1], 4u * 16);  // b * hq, rows up to the longest nq
  const unsigned warps = l.launches[0].block[0] / 32;
  EXPECT_GE(l.launches[0].grid[0] * warps, 5u);
  EXPECT_EQ(l.args[0].cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
  EXPECT_EQ(l.args[0].cu_seqlens_k, reinterpret_cast<const int*>(0x80000));
  EXPECT_EQ(l.args[0].q_row_stride, 16 * 64);
  EXPECT_FLOAT_EQ(l.args[0].softcap, 30.f);
  EXPECT_EQ(op().tolerance(DType::bf16).atol, fa.tolerance(DType::bf16).atol);
}

TEST(DecodeVarlen, DefaultsSplitMixedLengthsAsPagedBatchesDo) {
  const DeviceInfo h100 = device("sm_90a");
  // 64 sequences x 8 KV heads fill the GPU without splits; mixed lengths still want pieces of
  // about 1024 keys of the longest sequence, as a paged batch's.
  const Problem fixed = op().parse_problem("b=64,hq=32,hkv=8,nq=1,nk=8000,d=128");
  const Problem varlen = op().parse_problem("b=64,hq=32,hkv=8,nq=1,nk=8000,d=128,varlen=yes");
  const Params f = op().default_params(fixed, DType::bf16, h100);
  const Params v = op().default_params(varlen, DType::bf16, h100);
  EXPECT_EQ(f.values[0], 1);
  EXPECT_GE(v.values[0], 6);
  EXPECT_EQ(op().invalid_reason(v, varlen, DType::bf16, h100), std::nullopt);
  // The tiles are the fixed problem's.
  EXPECT_EQ(std::vector<std::int64_t>(f.values.begin() + 1, f.values.end()),
            std::vector<std::int64_t>(v.values.begin() + 1, v.values.end()));
  for (const char* arch : {"sm_80", "sm_90a"})
    for (const char* shape : {"b=3,hq=16,hkv=2,nq=16,nk=4099,d=64,causal=yes,varlen=yes",
                              "b=1,hq=8,hkv=8,nq=1,nk=1,d=256,varlen=yes"})
      for (DType t : {DType::bf16, DType::f16}) {
        const Problem p = op().parse_problem(shape);
        EXPECT_EQ(op().invalid_reason(op().default_params(p, t, device(arch)), p, t,
                                      device(arch)),
                  std::nullopt)
            << shape << " " << arch;
      }
}

// Paged and varlen batches of few (sequence, KV head) pairs: their lengths unknown when the grid
// is sized, splits for 3 CTAs per SM at the longest length (132 SMs: 32 pairs x 12, 16 x 24,
// 64 x 6), at least 256 keys each (8 pairs of 1500 keys: 4, as contiguous), where an SM holds
// two of the CTAs; d=256's row tiles hold one, and keep one wave (16 pairs x 8). Fixed-length
// contiguous K/V keeps one CTA per SM.
// The head dims d=96's tiles serve below 96 (72, 80, 88), one row tile, contiguous K/V on
// sm_90: up to 2 CTAs per SM (their keys stream fewer bytes per CTA); d=80 and d=96 there take
// kv_split=1. Not the few-pairs tiles, paged or varlen K/V, several row tiles, nor sm_80.
TEST(DecodeDefaults, HeadDimsBelow96TakeTwoCtasPerSmAndD80D96SplitTheirRows) {
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_EQ(h100.sm_count, 132);
  const auto key = [](const std::string& problem, const DeviceInfo& dev) {
    return op().params_key(checked_default(problem, dev));
  };
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
  const auto key = [&](const std::string& problem, const DeviceInfo& dev) {
    return op().params_key(checked_default(problem, dev));
  };
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

// Two splits of the row's tiles at d=96's and d=128's tiles (contiguous, one row tile, sm_90)
// merge in a cluster; not at 4 splits, not paged or varlen, not on sm_80 (no clusters), not at
// d=64's tiles (their own merged rule) nor d=256's.
TEST(DecodeDefaults, TwoSplitsOfTheRowsTilesMergeInACluster) {
  const DeviceInfo h100 = device("sm_90a");
  const auto key = [&](const std::string& problem, const DeviceInfo& dev) {
    return op().params_key(checked_default(problem, dev));
  };
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=128", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=32,hq=32,hkv=4,nq=1,nk=2500,d=80", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1,kv_split=1");
  EXPECT_EQ(key("b=10,hq=48,hkv=6,nq=1,nk=4000,d=112", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3,merge=1");
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=1,nk=8000,d=128", h100),  // 4 splits: the combine
            "splits=4,block_m=16,block_n=64,warps=4,stages=3");
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=256", h100),
            "splits=2,block_m=16,block_n=64,warps=4,stages=3");
  for (const char* outside : {"b=8,hq=32,hkv=8,nq=1,nk=5000,d=128,page=16",
                              "b=8,hq=32,hkv=8,nq=1,nk=5000,d=128,varlen=yes"})
    EXPECT_EQ(key(outside, h100).find("merge=1"), std::string::npos) << outside;
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=1,nk=5000,d=128", device("sm_80")).find("merge=1"),
            std::string::npos);
}

TEST(DecodeVarlen, FewPairsOfMixedLengthsSplitForThreeCtasPerSm) {
  const DeviceInfo h100 = device("sm_90a");
  ASSERT_EQ(h100.sm_count, 132);
  const auto splits = [&](const std::string& problem) {
    return checked_default(problem, h100).values[0];
  };
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=6000,d=128,page=16"), 12);
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=6000,d=128,varlen=yes"), 12);
  EXPECT_EQ(splits("b=8,hq=32,hkv=4,nq=1,nk=6000,d=128"), 4);
  EXPECT_EQ(splits("b=2,hq=32,hkv=8,nq=1,nk=12000,d=128,page=32"), 24);
  EXPECT_EQ(splits("b=16,hq=32,hkv=4,nq=1,nk=5000,d=128,page=16"), 6);
  EXPECT_EQ(splits("b=2,hq=32,hkv=4,nq=1,nk=1500,d=128,varlen=yes"), 4);
  EXPECT_EQ(splits("b=4,hq=16,hkv=4,nq=1,nk=8000,d=256,varlen=yes"), 8);
}

// NVRTC: the varlen split kernels (and the combine, whose code reads the offsets: one per arch,
// the other head dims' compile in DecodeCompile) for sm_80 and sm_90a: a small sample (CI has 2
// cores), the defaults without spills.
TEST(DecodeVarlen, KernelsCompileWithoutSpills) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<CompileJob> jobs;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const DeviceInfo dev = device(arch);
    for (const char* shape : {"b=8,hq=32,hkv=8,nq=1,nk=8192,d=64",
                              "b=4,hq=32,hkv=8,nq=16,nk=4099,d=128,causal=yes",
                              "b=4,hq=16,hkv=2,nq=5,nk=4099,d=128,causal=yes,window=1000,"
                              "softcap=yes,alibi=yes",
                              "b=8,hq=32,hkv=8,nq=1,nk=8192,d=256"}) {
      const DType t = std::string(shape).find("causal") != std::string::npos ? DType::f16
                                                                            : DType::bf16;
      const Problem p = op().parse_problem(std::string(shape) + ",varlen=yes");
      for (const KernelSource& k : op().kernels(op().default_params(p, t, dev), p, t)) {
        const bool combine = k.name_expression.find("combine") != std::string::npos;
        if (seen.insert({arch, combine ? "combine" : k.name_expression}).second)
          jobs.push_back({k, arch, {}});
      }
    }
  }
  std::printf("compiling %zu distinct kernels\n", jobs.size());
  ASSERT_LE(jobs.size(), 12u);
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), jobs, 0);
  ASSERT_EQ(outcomes.size(), jobs.size());
  int splits = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CompileOutcome& o = outcomes[i];
    const std::string& expr = jobs[i].source.name_expression;
    ASSERT_TRUE(o.kernel.has_value()) << expr << " for " << jobs[i].arch << ":\n" << o.error;
    const KernelResources& r = o.kernel->resources;
    std::printf("%-6s %-92s %3d registers, stack %d, spills %d/%d\n", jobs[i].arch.c_str(),
                expr.c_str(), r.registers, r.local_bytes, r.spill_stores, r.spill_loads);
    EXPECT_LE(r.registers, 255) << expr;
    EXPECT_EQ(r.spill_stores, 0) << jobs[i].arch << " " << expr;
    EXPECT_EQ(r.spill_loads, 0) << jobs[i].arch << " " << expr;
    splits += expr.find("flash_decode_split") != std::string::npos &&
              expr.find(", true>") != std::string::npos;
  }
  EXPECT_EQ(splits, 8);  // every sample's split kernel is a VARLEN one
}

}  // namespace
}  // namespace ktune
