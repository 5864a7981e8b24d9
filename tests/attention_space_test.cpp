// The flash attention op's search space: invalid points carry their reason, valid points pass
// the kernels' own checks, the wgmma kernel's points and reasons, e4m3's.
#include "tests/attention_test_support.hpp"

namespace ktune {
namespace {

using namespace attention_test;

// ---- the space ----

TEST(AttentionSpace, InvalidPointsCarryTheirReason) {
  const Problem p = op().parse_problem(kMha);
  const Space h100(op(), p, DType::bf16, device("sm_90a"));
  EXPECT_EQ(h100.points().size(), 4u * 4 * 4 * 3 * 2 * 2 * 2 * 2 * 2 * 2 * 2);
  // impl=0: (block_m, warps) in {(64,4), (128,4), (128,8), (256,8)}, every block_n, stages,
  // q_regs and pad, less the shared-memory overflows at d=128: 128x128 s3 with pad (both warp
  // counts) and 256x128 s3 (with and without pad), each with both q_regs. impl=1: block_m 64,
  // 128, 192 (1-3 consumers, warps fixed), block_n 64 and 128, stages 2 and 3, ping-pong with 2
  // or 3 consumers, less 192x128 at d=128 (it spills; s3 also needs 240 KiB); each persistent or
  // not; and without register reallocation (reg_split=0) the 2-consumer points of block_n=64
  // (stages, ping-pong, persistent: 8), the only ones that fit at d=128. block_n=80 is d=256's.
  // And kv_apart=1 for each of those 40 with stages=2 (20).
  EXPECT_EQ(h100.valid_count(),
            (4u * 3 * 2 * 2 * 2 - 2 * 2 - 2 * 2) + ((4 + 8 + 2 * 2) * 2 + 8) * 3 / 2);
  std::size_t counted = 0;
  for (const auto& [reason, n] : h100.invalid_reasons()) {
    EXPECT_FALSE(reason.empty());
    counted += n;
  }
  EXPECT_EQ(counted, h100.points().size() - h100.valid_count());

  const auto why = [&](const char* params, const char* problem, const char* arch = "sm_90a") {
    return op().invalid_reason(op().parse_params(params), op().parse_problem(problem),
                               DType::bf16, device(arch)).value_or("");
  };
  EXPECT_EQ(why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0", kMha), "");
  EXPECT_EQ(why("block_m=64,block_n=64,warps=8,stages=2,q_regs=0,smem_pad=0,impl=0", kMha),
            "block_m=64 is not a multiple of 16 * warps=8 (each warp owns whole 16-row fragments)");
  EXPECT_EQ(why("block_m=256,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0", kMha),
            "block_m=256 / warps=4 = 64 query rows per warp (at most 32: two 16-row fragments)");
  EXPECT_EQ(why("block_m=256,block_n=128,warps=8,stages=3,q_regs=0,smem_pad=0,impl=0", kMha),
            "block_m=256, block_n=128, stages=3 at d=128 need 262144 bytes of shared memory (Q "
            "tile + 3 K and V tiles), more than the 227 KiB any GPU gives a block");
  // 128x128 s2 at d=128 with padding: 170 KiB fits the H100 (227 KiB), not the A100 (163 KiB).
  const char* big = "block_m=128,block_n=128,warps=8,stages=2,q_regs=0,smem_pad=1,impl=0";
  EXPECT_EQ(why(big, kMha), "");
  EXPECT_EQ(why(big, kMha, "sm_80"),
            "block_m=128, block_n=128, stages=2, smem_pad=1 at d=128 need 174080 bytes of shared "
            "memory (Q tile + 2 K and V tiles), more than the device's 166912 per block");
  // Values outside the lists and other dtypes.
  Params q =
      op().parse_params("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0");
  q.values[3] = 5;
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, device("sm_90a")),
            "stages=5 is not one of 2, 3, 4");
  q.values[3] = 4;
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, device("sm_90a")),
            "stages=4 is for e4m3 tiles (half the bytes); 16-bit tiles take 2 or 3");
  q.values[3] = 2;
  EXPECT_TRUE(contains(op().invalid_reason(q, p, DType::f32, device("sm_90a")).value_or(""),
                       "is not supported by flash_attention (dtypes: bf16, fp16, e4m3)"));
  DeviceInfo turing = device("sm_80");
  turing.cc_major = 7;
  turing.cc_minor = 5;
  EXPECT_EQ(op().invalid_reason(q, p, DType::bf16, turing),
            "needs compute capability 8.0 or later (cp.async, bf16 mma.sync); the device is 7.5");
}

TEST(AttentionSpace, ValidPointsPassTheKernelsOwnChecks) {
  // No valid point may reach a static_assert of flash_attention_fwd.
  for (std::int64_t d : {32, 64, 96, 128, 256}) {
    Problem p = op().default_problem();
    p.values[5] = d;
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const Space s(op(), p, DType::f16, device(arch));
      EXPECT_GT(s.valid_count(), 0u) << d << " " << arch;
      for (const Params& params : s.valid_points()) {
        const auto v = params.values;
        if (v[6] == 1) {
          EXPECT_EQ(flash_attention_sm90_invalid_reason(static_cast<int>(d),
                                                        static_cast<int>(v[1]),
                                                        static_cast<int>(v[0] / 64),
                                                        static_cast<int>(v[3])),
                    nullptr)
              << op().params_key(params);
          EXPECT_EQ(std::string(arch), "sm_90a") << op().params_key(params);
          continue;
        }
        EXPECT_EQ(flash_attention_invalid_reason(static_cast<int>(d), static_cast<int>(v[0]),
                                                 static_cast<int>(v[1]), static_cast<int>(v[2]),
                                                 static_cast<int>(v[3]), 1, v[5] != 0),
                  nullptr)
            << op().params_key(params);
        EXPECT_LE(op().dynamic_shared_bytes(params, p, DType::f16, 0),
                  static_cast<unsigned>(device(arch).smem_optin_per_block));
      }
    }
  }
}

// The wgmma kernel (impl=1): its reasons, its name expression, and the tunable added after
// databases were written (pingpong), which keys written before it parse without.
TEST(AttentionSpace, WgmmaKernelPointsAndTheirReasons) {
  const auto why = [&](const char* params, const char* problem, const char* arch = "sm_90a") {
    return op().invalid_reason(op().parse_params(params), op().parse_problem(problem),
                               DType::bf16, device(arch)).value_or("");
  };
  const char* two = "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1";
  EXPECT_EQ(why(two, kMha), "");
  EXPECT_EQ(why(two, kMha, "sm_80"), "impl=1 (wgmma, TMA) needs sm_90a; the device is 8.0");
  EXPECT_TRUE(contains(why(two, "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=32"),
                       "d = 64, 96, 128 or 256"));
  // d=96 (since 2026-12-04): 16-bit types, d=128's padded tiles and its register limits.
  const char* d96 = "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=96";
  EXPECT_EQ(why(two, d96), "");
  EXPECT_EQ(op().invalid_reason(op().parse_params(two), op().parse_problem(d96), DType::e4m3,
                                device("sm_90a")).value_or(""),
            "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1: e4m3 takes "
            "D = 128 or 256 (its rows fill whole 128-byte swizzled column blocks)");
  EXPECT_TRUE(contains(why("block_m=192,block_n=128,warps=16,stages=2,q_regs=0,smem_pad=0,impl=1",
                           d96),
                       "3 consumer warpgroups and block_n=128 at d=96 spills"));
  EXPECT_TRUE(contains(why("block_m=192,block_n=64,warps=16,stages=2,q_regs=0,smem_pad=0,impl=1",
                           "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=96,page=16"),
                       "paged cache and 3 consumer warpgroups at d=96 spills"));
  EXPECT_EQ(why("block_m=128,block_n=64,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,reg_split=0",
                d96),
            "");
  // Varlen: the producer's threads copy the tiles; one CTA per query tile, 16-bit types.
  const char* varlen = "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,varlen=yes";
  EXPECT_EQ(why(two, varlen), "");
  EXPECT_TRUE(contains(why((std::string(two) + ",persistent=1").c_str(), varlen),
                       "varlen=yes runs one CTA per query tile (persistent=0)"));
  EXPECT_EQ(op().invalid_reason(op().parse_params(two), op().parse_problem(varlen), DType::e4m3,
                                device("sm_90a")),
            "varlen=yes takes bf16 or fp16 (e4m3's V transpose is per batch)");
  // VARLEN is the wgmma kernel's last template argument, after PERSISTENT and REG_SPLIT.
  EXPECT_EQ(op().kernels(op().parse_params(two), op().parse_problem(varlen), DType::bf16)[0]
                .name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 128, 2, 2, false, false, false, false, "
            "false, false, true, true>");
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=128,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1", kMha),
      "warps=12, not 8"));
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=128,warps=12,stages=2,q_regs=1,smem_pad=0,impl=1", kMha),
      "q_regs=0 and smem_pad=0"));
  EXPECT_TRUE(contains(
      why("block_m=64,block_n=64,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1", kMha),
      "2 or 3 consumer warpgroups"));
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0,pingpong=1", kMha),
      "pingpong=1 is for impl=1"));
  EXPECT_TRUE(contains(why("block_m=192,block_n=64,warps=16,stages=2,q_regs=0,smem_pad=0,impl=1",
                           "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256"),
                       "160 registers"));
  // 80-key tiles: the wgmma kernel at d=256 (16-bit; a paged cache of 16-key pages), where
  // two consumers fit two stages of them (224 KiB), not of 128 keys.
  const char* d256 = "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256";
  const char* eighty = "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1";
  EXPECT_EQ(why(eighty, d256), "");
  EXPECT_EQ(why("block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1", d256),
            "block_m=128, block_n=128, stages=2 at d=256 need 328768 bytes of shared memory (Q "
            "tile + 2 K and V tiles), more than the 227 KiB any GPU gives a block");
  EXPECT_EQ(why(eighty, kMha), "block_n=80 is searched at d=256 with bf16 or fp16 only (d=128): "
                               "block_n=64 or 128");
  EXPECT_EQ(op().invalid_reason(op().parse_params(eighty), op().parse_problem(d256),
                                DType::e4m3, device("sm_90a")),
            "block_n=80 is searched at d=256 with bf16 or fp16 only (d=256, e4m3): block_n=64 or "
            "128");
  EXPECT_EQ(why("block_m=128,block_n=80,warps=8,stages=2,q_regs=0,smem_pad=0,impl=0", d256),
            "block_n=80 is for impl=1 (d=256); impl=0 takes 32, 64 or 128");
  EXPECT_EQ(why(eighty, "b=2,hq=16,hkv=16,nq=1,nk=4096,d=256,page=16"), "");
  EXPECT_EQ(why(eighty, "b=2,hq=16,hkv=16,nq=1,nk=4096,d=256,page=64"),
            "block_n=80 with a paged cache takes page=16 (a key tile covers whole pages or lies "
            "in one), not page=64");
  EXPECT_EQ(op().kernels(op().parse_params(eighty), op().parse_problem(d256), DType::bf16)[0]
                .name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 256, 80, 2, 2, false, false, false, false, "
            "false>");
  EXPECT_EQ(op().dynamic_shared_bytes(op().parse_params(eighty), op().parse_problem(d256),
                                      DType::bf16, 0),
            flash_attention_sm90_smem_bytes(256, 80, 2, 2));
  EXPECT_LE(flash_attention_sm90_smem_bytes(256, 80, 2, 2), 227u * 1024u);

  // pingpong is left out of keys at 0, so keys written before it mean what they meant.
  const Params old_key = op().parse_params(two);
  EXPECT_EQ(old_key.values.size(), op().tunables().size());
  EXPECT_EQ(old_key.values[op().param_index("pingpong")], 0);
  EXPECT_EQ(old_key.values[op().param_index("reg_split")], 1);  // left out of keys at 1
  EXPECT_EQ(op().params_key(old_key), two);
  const Params pp = op().parse_params(std::string(two) + ",pingpong=1");
  EXPECT_EQ(op().params_key(pp), std::string(two) + ",pingpong=1");
  const Problem p = op().parse_problem("b=2,hq=16,hkv=8,nq=300,nk=500,d=128,causal=yes");
  EXPECT_EQ(op().kernels(pp, p, DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 128, 2, 2, true, true, false, false, "
            "false>");
  EXPECT_EQ(op().kernels(old_key, p, DType::f16)[0].file, "attention/flash_attention_sm90.cuh");
  EXPECT_EQ(op().block_threads(pp, p, DType::bf16, 0), 384);
  EXPECT_EQ(op().dynamic_shared_bytes(pp, p, DType::bf16, 0),
            flash_attention_sm90_smem_bytes(128, 128, 2, 2));

  // persistent: impl=1 only, left out of keys at 0, the last template argument when on.
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0,persistent=1",
          kMha),
      "persistent=1 is for impl=1"));
  const Params per = op().parse_params(std::string(two) + ",pingpong=1,persistent=1");
  EXPECT_EQ(op().params_key(per), std::string(two) + ",pingpong=1,persistent=1");
  EXPECT_EQ(op().params_key(op().parse_params(std::string(two) + ",persistent=1")),
            std::string(two) + ",persistent=1");
  EXPECT_EQ(op().kernels(per, p, DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 128, 2, 2, true, true, false, false, "
            "false, true>");
  EXPECT_EQ(why((std::string(two) + ",persistent=1").c_str(), kMha), "");
  // reg_split: impl=1 with 2-3 consumers, left out of keys at 1, after PERSISTENT when off;
  // refused where a consumer's launch-bound registers spill.
  const std::string split = "block_m=128,block_n=64,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1";
  const Params even = op().parse_params(split + ",reg_split=0");
  EXPECT_EQ(op().params_key(even), split + ",reg_split=0");
  EXPECT_EQ(op().kernels(even, p, DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 64, 2, 2, false, true, false, false, "
            "false, false, false>");
  EXPECT_EQ(why((split + ",reg_split=0").c_str(), kMha), "");
  EXPECT_TRUE(contains(why((std::string(two) + ",reg_split=0").c_str(), kMha),
                       "168 registers, which spill at d=128, block_n=128, 2 consumers"));
  EXPECT_TRUE(contains(
      why("block_m=64,block_n=64,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1,reg_split=0", kMha),
      "only reg_split=1 is searched"));
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0,reg_split=0", kMha),
      "reg_split=0 is for impl=1"));
  // kv_apart: impl=1 with 2 stages on contiguous K/V, left out of keys at 0, spelled last
  // (after VARLEN = false and PAGE = 0) when on; 8 bytes of shared memory per stage more.
  const Params apart = op().parse_params(split + ",kv_apart=1");
  EXPECT_EQ(op().params_key(apart), split + ",kv_apart=1");
  EXPECT_EQ(op().params_key(op().parse_params(split + ",kv_apart=0")), split);
  EXPECT_EQ(op().kernels(apart, p, DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 64, 2, 2, false, true, false, false, "
            "false, false, true, false, 0, true>");
  EXPECT_EQ(why((split + ",kv_apart=1").c_str(), kMha), "");
  EXPECT_EQ(op().dynamic_shared_bytes(apart, p, DType::bf16, 0),
            op().dynamic_shared_bytes(op().parse_params(split), p, DType::bf16, 0) + 2 * 8);
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,kv_apart=1", kMha),
      "kv_apart=1 is for stages=2"));
  EXPECT_TRUE(contains(why((split + ",kv_apart=1").c_str(),
                           "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,page=64"),
                       "kv_apart=1 is for contiguous K/V without varlen"));
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0,kv_apart=1", kMha),
      "kv_apart=1 is for impl=1"));
  EXPECT_TRUE(contains(why("block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,"
                           "persistent=1,kv_apart=1",
                           "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256"),
                       "kv_apart=1 with persistent=1 at d=256 and two consumers spills"));
  const char* apart256 = "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,"
                         "pingpong=1,kv_apart=1";
  for (const char* mask : {",window=512", ",alibi=yes", ",causal=yes,window=64,softcap=yes"})
    EXPECT_EQ(why(apart256, (std::string("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256") + mask).c_str()),
              "kv_apart=1 at d=256 with two consumers and a window or ALiBi spills (their 240 "
              "registers): block_m=64 or kv_apart=0");
  EXPECT_EQ(why(apart256, "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,softcap=yes"), "");
  // Its grid: min(work items, SMs); the items are query tiles times (batch, head) pairs.
  EXPECT_EQ(flash_attention_sm90_work(1000, 128, 3 * 8), 8 * 24);
  EXPECT_EQ(flash_attention_sm90_work(1, 192, 1), 1);
  EXPECT_EQ(flash_attention_sm90_work(1 << 30, 64, 65535), (1ll << 24) * 65535);
}

// e4m3 inputs: the wgmma kernel only, at d = 128 or 256 with 128-key tiles; two kernels (V's
// transpose into the workspace, then attention); o in bf16; scales folded into the arguments.
TEST(AttentionSpace, E4m3PointsKernelsAndTensors) {
  const auto why = [&](const char* params, const char* problem, const char* arch = "sm_90a") {
    return op().invalid_reason(op().parse_params(params), op().parse_problem(problem),
                               DType::e4m3, device(arch)).value_or("");
  };
  const Problem p = op().parse_problem(kMha);
  const Params def = op().default_params(p, DType::e4m3, device("sm_90a"));
  EXPECT_EQ(op().params_key(def),
            "block_m=128,block_n=128,warps=12,stages=4,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  EXPECT_EQ(op().invalid_reason(def, p, DType::e4m3, device("sm_90a")), std::nullopt);
  EXPECT_EQ(why("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0", kMha),
            "e4m3 runs on the wgmma kernel only (impl=1, sm_90a)");
  const char* four = "block_m=128,block_n=128,warps=12,stages=4,q_regs=0,smem_pad=0,impl=1";
  EXPECT_EQ(why(four, kMha, "sm_80"), "impl=1 (wgmma, TMA) needs sm_90a; the device is 8.0");
  EXPECT_TRUE(contains(why(four, "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64"),
                       "e4m3 takes D = 128 or 256"));
  EXPECT_TRUE(contains(
      why("block_m=128,block_n=64,warps=12,stages=4,q_regs=0,smem_pad=0,impl=1", kMha),
      "e4m3 takes BLOCK_N = 128"));
  EXPECT_TRUE(contains(why(four, "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256"),
                       "at d=256 (e4m3) need"));
  const Problem d256 = op().parse_problem("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=yes");
  const Params def256 = op().default_params(d256, DType::e4m3, device("sm_90a"));
  EXPECT_EQ(op().invalid_reason(def256, d256, DType::e4m3, device("sm_90a")), std::nullopt);
  EXPECT_EQ(op().params_key(def256), "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,"
                                     "smem_pad=0,impl=1,pingpong=1,kv_apart=1");

  const std::vector<KernelSource> ks = op().kernels(def, p, DType::e4m3);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_attention_sm90<ktune::e4m3, 128, 128, 2, 4, true, false, false, false, "
            "false>");
  EXPECT_EQ(ks[1].file, "attention/fp8_transpose.cuh");
  EXPECT_EQ(ks[1].name_expression, "ktune::fp8_v_transpose<128>");
  EXPECT_EQ(op().block_threads(def, p, DType::e4m3, 1), kFp8TransposeThreads);
  EXPECT_EQ(op().dynamic_shared_bytes(def, p, DType::e4m3, 0),
            flash_attention_sm90_smem_bytes(128, 128, 2, 4, 1));
  EXPECT_EQ(op().dynamic_shared_bytes(def, p, DType::e4m3, 1), 0u);
  const Problem odd = op().parse_problem("b=3,hq=8,hkv=2,nq=300,nk=1000,d=128");
  EXPECT_EQ(op().workspace_bytes(def, odd, DType::e4m3), 3u * 2 * 128 * 1024);
  EXPECT_EQ(op().workspace_bytes(def, odd, DType::bf16), 0u);

  const std::vector<TensorSpec> ts = op().tensors(odd, DType::e4m3);
  EXPECT_EQ(ts[0].dtype, DType::e4m3);
  EXPECT_EQ(ts[2].dtype, DType::e4m3);
  EXPECT_EQ(ts[3].name, "o");
  EXPECT_EQ(ts[3].dtype, DType::bf16);
  EXPECT_EQ(ts[3].alignment, 0u);  // the op's 16 bytes
  EXPECT_EQ(ts[4].alignment, 4u);  // lse
  EXPECT_GT(op().tolerance(odd, DType::e4m3).atol, op().tolerance(odd, DType::bf16).atol);

  // The run: V's transpose into the workspace is launched first.
  struct Recorder final : Launcher {
    void launch(const KernelLaunch& l) override {
      launches.push_back(l);
      if (launches.size() == 1) std::memcpy(&t, l.args, sizeof t);
    }
    std::vector<KernelLaunch> launches;
    Fp8VTransposeArgs t{};
  };
  const std::uint64_t tensors[8] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0, 0, 0};
  const KernelHandle kernels[2] = {reinterpret_cast<KernelHandle>(0x100),
                                   reinterpret_cast<KernelHandle>(0x200)};
  double scalars[5] = {0.0, 50.0, 0.25, 0.5, 2.0};
  const Params pe = op().parse_params(std::string(four) + ",pingpong=1");
  RunArgs a;
  a.params = &pe;
  a.problem = &odd;
  a.dtype = DType::e4m3;
  a.tensors = tensors;
  a.scalars = scalars;
  a.kernels = kernels;
  Recorder r;
  EXPECT_TRUE(contains(run_error([&] { op().run(a, r); }), "e4m3 needs a workspace of 786432"));
  a.workspace = 0x900000;
  try {
    op().run(a, r);  // the attention launch needs the driver for its tensor maps
  } catch (const std::exception&) {
  }
  ASSERT_GE(r.launches.size(), 1u);
  EXPECT_EQ(r.launches[0].kernel, kernels[1]);
  EXPECT_EQ(r.launches[0].grid[0], 1024u / kFp8TransposeKeys);
  EXPECT_EQ(r.launches[0].grid[1], 2u);
  EXPECT_EQ(r.launches[0].grid[2], 3u);
  EXPECT_EQ(r.t.v, reinterpret_cast<const void*>(0x30000));
  EXPECT_EQ(r.t.vt, reinterpret_cast<void*>(0x900000));
  EXPECT_EQ(r.t.nk_pad, 1024);
  EXPECT_EQ(r.t.v_row_stride, 128);
  // The reference gets the scales: q's and k's in the softmax scale, v's as o_scale.
  RecordingLauncher ref;
  op().run_reference(a, ref);
  ASSERT_EQ(ref.args.size(), 1u);
  EXPECT_FLOAT_EQ(ref.args[0].scale, 0.25f * 0.5f / std::sqrt(128.0f));
  EXPECT_FLOAT_EQ(ref.args[0].o_scale, 2.0f);
  scalars[3] = 0.0;
  EXPECT_TRUE(contains(run_error([&] { op().run_reference(a, ref); }),
                       "k_scale 0.000000 must be a positive finite dequantisation scale"));
  // The fragment's key order that Vt stores: a permutation of each 32-key slice.
  std::vector<int> seen(32, 0);
  for (int c = 0; c < 32; ++c) ++seen[fp8_key_of_column(c)];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 32);
  EXPECT_EQ(fp8_key_of_column(0), 0);
  EXPECT_EQ(fp8_key_of_column(2), 8);
  EXPECT_EQ(fp8_key_of_column(5), 3);
  EXPECT_EQ(fp8_key_of_column(19), 25);
}

// The wgmma kernel's launch reads Q, K and V through tensor maps: a broadcast stride (0 over
// more than one head or batch) cannot be one, and is refused with the tensor's name before any
// driver call; a valid layout gets as far as the encoding, which needs the driver.
TEST(AttentionRun, WgmmaLaunchRefusesBroadcastStrides) {
  const Problem p = op().parse_problem("b=2,hq=4,hkv=2,nq=100,nk=300,d=128");
  const Params params = op().parse_params(
      "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  std::int64_t layout[12] = {4 * 100 * 128, 100 * 128, 128, 0,           300 * 128, 128,
                             2 * 300 * 128, 300 * 128, 128, 4 * 100 * 128, 100 * 128, 128};
  EXPECT_EQ(run_error([&] { run(params, p, 0, layout); }),
            "flash_attention impl=1: k batch stride 0 (a broadcast) cannot be read through a "
            "tensor map; pass a materialised tensor, or tune this problem's layout with impl=0");
  layout[3] = 2 * 300 * 128;
  layout[7] = 0;  // v head stride, 2 KV heads
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }), "v head stride 0"));
  // Valid strides: past the checks to the encoding. On a machine without a driver (CI) that is
  // NoDevice; with one, the recorded launch.
  layout[7] = 300 * 128;
  try {
    const RecordingLauncher l = run(params, p, 0, layout);
    EXPECT_EQ(l.launches.size(), 1u);
  } catch (const InvalidArgument& e) {
    ADD_FAILURE() << "a valid layout refused: " << e.what();
  } catch (const std::exception& e) {
    EXPECT_TRUE(contains(e.what(), "driver") || contains(e.what(), "CUDA")) << e.what();
  }
}

TEST(AttentionSpace, KernelsRefuseInvalidPoints) {
  const Params bad =
      op().parse_params("block_m=256,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0");
  EXPECT_TRUE(contains(run_error([&] { op().kernels(bad, op().default_problem(), DType::bf16); }),
                       "64 query rows per warp"));
}

}  // namespace
}  // namespace ktune
