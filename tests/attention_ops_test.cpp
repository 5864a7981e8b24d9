// The flash attention op's host side: problem keys and reasons (the mask variants and varlen
// included, and keys written before them), defaults, tensors and flops (the space:
// attention_space_test.cpp; launches: attention_run_test.cpp).
#include "tests/attention_test_support.hpp"

namespace ktune {
namespace {

using namespace attention_test;

// ---- problems ----

TEST(AttentionProblem, KeysRoundTripInDeclaredOrder) {
  const Problem p = op().parse_problem("d=64,nk=1000,nq=17,hkv=2,hq=8,b=3,causal=yes");
  EXPECT_EQ(p.values, (std::vector<std::int64_t>{3, 8, 2, 17, 1000, 64, 1, 0, 0, 0, 0, 0}));
  // Variants at their defaults are left out of keys (keys written before them match).
  EXPECT_EQ(op().problem_key(p), "b=3,hq=8,hkv=2,nq=17,nk=1000,d=64,causal=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(p)), p);
  EXPECT_EQ(op().parse_problem("3x8x2x17x1000x64"), op().parse_problem("b=3,hq=8,hkv=2,nq=17,"
                                                                       "nk=1000,d=64"));
  EXPECT_EQ(op().problem_key(op().default_problem()),
            "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=no");
  const Problem v = op().parse_problem("alibi=yes,window=4096,b=1,hq=4,hkv=4,nq=9,nk=9,d=32,"
                                       "softcap=yes");
  EXPECT_EQ(v.values, (std::vector<std::int64_t>{1, 4, 4, 9, 9, 32, 0, 4096, 1, 1, 0, 0}));
  EXPECT_EQ(op().problem_key(v),
            "b=1,hq=4,hkv=4,nq=9,nk=9,d=32,causal=no,window=4096,softcap=yes,alibi=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(v)), v);
  // "x" shapes name the integer dims in order; the window is the eighth.
  EXPECT_EQ(op().parse_problem("1x4x4x9x9x32x4096"),
            op().parse_problem("b=1,hq=4,hkv=4,nq=9,nk=9,d=32,window=4096"));
  EXPECT_EQ(op().name(), "flash_attention");
  EXPECT_EQ(op().family(), "attention");
  EXPECT_EQ(find_op("flash_attention"), &op());
}

TEST(AttentionProblem, KeysWrittenBeforeTheVariantsParseWithThemOff) {
  // The shipped database's keys (and any user database's) end at causal: they are the same
  // problems as before, every variant off, and print as they were written (variants at their
  // defaults are left out), so their rows match exactly.
  for (const char* old : {"b=16,hq=16,hkv=16,nq=512,nk=512,d=64,causal=no",
                          "b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128,causal=yes"}) {
    const Problem p = op().parse_problem(old);
    ASSERT_EQ(p.values.size(), 12u);
    EXPECT_EQ(std::vector<std::int64_t>(p.values.begin() + 7, p.values.end()),
              (std::vector<std::int64_t>{0, 0, 0, 0, 0}));
    EXPECT_EQ(op().problem_key(p), std::string(old));
    EXPECT_EQ(op().parse_problem(std::string(old) +
                                 ",window=0,softcap=no,alibi=no,varlen=no,page=0"),
              p);
  }
  // The default kernel of an old problem has every variant off (on the A100, the same kernel as
  // before the variants; on the H100 the wgmma kernel's default since 2026-11-24, persistent
  // under a causal mask).
  const Problem old = op().parse_problem("b=4,hq=32,hkv=8,nq=4000,nk=4000,d=128,causal=yes");
  EXPECT_EQ(op().kernels(op().default_params(old, DType::bf16, device("sm_80")), old,
                         DType::bf16)[0].name_expression,
            "ktune::flash_attention_fwd<ktune::bf16, 128, 128, 64, 4, 2, true, false, 1, false, "
            "false, false, false>");
  EXPECT_EQ(op().kernels(op().default_params(old, DType::bf16, device("sm_90a")), old,
                         DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 64, 3, 3, false, true, false, false, "
            "false, true>");
}

// Defaults that follow the device: on Hopper the wgmma kernel at d=64/96/128/256, with one
// consumer's 64-row tiles for short grids (wgmma_single_consumer); on the A100 the mma.sync rows,
// a short grid halved to block_m=64 when its waves of 64-row tiles (0.55 of a 128-row one) cost
// less (held-out problems measured on the H100 with those rows).
TEST(AttentionProblem, DefaultsFollowTheDevice) {
  const auto key = [](const char* shape, const char* arch) {
    const Problem p = op().parse_problem(shape);
    const Params d = op().default_params(p, DType::bf16, device(arch));
    EXPECT_EQ(op().invalid_reason(d, p, DType::bf16, device(arch)), std::nullopt) << shape;
    return op().params_key(d);
  };
  const char* one128 = "block_m=64,block_n=128,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1";
  const char* one64 = "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1";
  const char* two = "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,"
                    "pingpong=1";
  const char* three = "block_m=192,block_n=128,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,"
                      "pingpong=1";
  // nq <= 64: one tile of 64 rows.
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=64,nk=8192,d=128,causal=yes", "sm_90a"), one128);
  // 2 x 32 x 1 = 64 tiles of 128 rows on 132 SMs, under half: 64-row tiles.
  EXPECT_EQ(key("b=2,hq=32,hkv=8,nq=128,nk=4096,d=128,causal=yes", "sm_90a"), one128);
  // 72 and 300 tiles of 128 rows: the row, padding and all; persistent with more tiles than SMs
  // (causal, or up to 4096 keys at d=128).
  EXPECT_EQ(key("b=3,hq=24,hkv=8,nq=96,nk=6000,d=128,causal=yes", "sm_90a"), two);
  EXPECT_EQ(key("b=5,hq=20,hkv=4,nq=300,nk=1300,d=128,causal=no", "sm_90a"),
            std::string(two) + ",persistent=1");
  // Up to 320 keys the tiles that pad the fewest query rows (ties to the taller), 64 keys,
  // no turns, persistent with 2-3 consumers: 300 rows pad to 384 in tiles of 128 or 192
  // (200 tiles of 192), 230 to 256 in 128, 160 to 192 in 192; d=64 takes 64 rows too (300 in
  // 320), d=128 only up to 64 rows.
  const char* short192 = "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,"
                         "persistent=1";
  const char* short128 = "block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,"
                         "persistent=1";
  EXPECT_EQ(key("b=5,hq=20,hkv=4,nq=300,nk=300,d=128,causal=no", "sm_90a"), short192);
  EXPECT_EQ(key("b=12,hq=16,hkv=16,nq=230,nk=230,d=128,causal=yes", "sm_90a"), short128);
  EXPECT_EQ(key("b=16,hq=16,hkv=4,nq=160,nk=160,d=128,causal=no", "sm_90a"), short192);
  EXPECT_EQ(key("b=24,hq=12,hkv=12,nq=300,nk=300,d=64,causal=no", "sm_90a"), one64);
  EXPECT_EQ(key("b=8,hq=32,hkv=8,nq=256,nk=256,d=64,causal=yes", "sm_90a"), short128);
  // ... unless those tiles number no more than the SMs (128 heads x 1 tile of 192 rows) or the
  // keys fit one tile: the mma.sync rows and their short-grid rule, with 32-key tiles (3 stages)
  // at d=64 and at d=128 where they pad fewer keys (256 pad to 256 either way).
  EXPECT_EQ(key("b=16,hq=8,hkv=8,nq=150,nk=150,d=64,causal=no", "sm_90a"),
            "block_m=64,block_n=32,warps=4,stages=3,q_regs=1,smem_pad=0,impl=0");
  EXPECT_EQ(key("b=128,hq=8,hkv=8,nq=64,nk=64,d=64,causal=no", "sm_90a"),
            "block_m=64,block_n=32,warps=4,stages=3,q_regs=1,smem_pad=0,impl=0");
  // One consumer at d=128 runs persistently too (512 tiles).
  EXPECT_EQ(key("b=16,hq=32,hkv=8,nq=48,nk=300,d=128,causal=yes", "sm_90a"),
            std::string(one64) + ",persistent=1");
  // Where one consumer's 64-row tiles fit the 132 SMs (4 x 28, 1 x 64, 4 x 32): those, not
  // persistent, with 64-key tiles under a causal mask, else 128.
  EXPECT_EQ(key("b=1,hq=28,hkv=4,nq=200,nk=200,d=128,causal=yes", "sm_90a"), one64);
  EXPECT_EQ(key("b=4,hq=16,hkv=16,nq=64,nk=250,d=64,causal=no", "sm_90a"), one128);
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=200,nk=200,d=64,causal=no", "sm_90a"), one128);
  // Causal d=128 in one wave keeps the wgmma kernel, not persistent: 128-row tiles where they
  // fit the 132 SMs (3 x 32, 2 x 64), else 192 (3 x 64 = 192 tiles of 128 rows would not).
  const char* wave128 = "block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1";
  EXPECT_EQ(key("b=1,hq=32,hkv=8,nq=320,nk=320,d=128,causal=yes", "sm_90a"), wave128);
  EXPECT_EQ(key("b=4,hq=16,hkv=4,nq=180,nk=180,d=128,causal=yes", "sm_90a"), wave128);
  EXPECT_EQ(key("b=1,hq=64,hkv=8,nq=300,nk=300,d=128,causal=yes", "sm_90a"),
            "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1");
  // Without the mask, the same rows taking turns: 128-key tiles in 2 stages where they pad no
  // more keys than 64-key ones (256, 250), else (300 keys; 192 rows) 64-key tiles in 3; the
  // persistent path at 128 rows.
  const char* turns128 = "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,"
                         "pingpong=1,persistent=1";
  EXPECT_EQ(key("b=2,hq=32,hkv=32,nq=256,nk=256,d=128,causal=no", "sm_90a"), turns128);
  EXPECT_EQ(key("b=4,hq=16,hkv=16,nq=250,nk=250,d=128,causal=no", "sm_90a"), turns128);
  EXPECT_EQ(key("b=3,hq=16,hkv=16,nq=160,nk=300,d=128,causal=no", "sm_90a"),
            "block_m=128,block_n=64,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
            "persistent=1");
  EXPECT_EQ(key("b=1,hq=64,hkv=8,nq=300,nk=300,d=128,causal=no", "sm_90a"),
            "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  // d=256 keeps the mma.sync rows for short keys (not measured with the wgmma kernel there).
  EXPECT_EQ(key("b=8,hq=16,hkv=16,nq=300,nk=300,d=256,causal=no", "sm_90a"),
            op().params_key(Params{{128, 32, 8, 3, 1, 0, 0, 0, 0}}));
  // One wave of 192-row tiles (120 and 96 CTAs) against two of 128 rows.
  const char* three64 = "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,"
                        "pingpong=1";
  EXPECT_EQ(key("b=2,hq=20,hkv=20,nq=500,nk=2500,d=128,causal=no", "sm_90a"), three64);
  EXPECT_EQ(key("b=3,hq=32,hkv=8,nq=180,nk=2000,d=128,causal=no", "sm_90a"), three64);
  // The ANCHORS shapes keep 128 rows (8 waves against 6 x 1.5), persistent up to 4096 keys;
  // causal ones with over 132 tiles of 192 rows take 192x64 tiles without turns, persistent.
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=no", "sm_90a"),
            std::string(two) + ",persistent=1");
  EXPECT_EQ(key("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=no", "sm_90a"), two);
  EXPECT_EQ(key("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=yes", "sm_90a"),
            "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,persistent=1");
  // ... from 2048 query rows: at 1000 the 128-row tiles taking turns, persistent.
  EXPECT_EQ(key("b=2,hq=28,hkv=4,nq=1000,nk=1000,d=128,causal=yes", "sm_90a"),
            std::string(two) + ",persistent=1");
  // d=64: 192-row tiles unless more than a quarter of their rows would be padding (200 rows in
  // 384, 420 in 576; not 5000 in 5184).
  EXPECT_EQ(key("b=8,hq=16,hkv=16,nq=200,nk=1200,d=64,causal=no", "sm_90a"), one64);
  EXPECT_EQ(key("b=6,hq=16,hkv=16,nq=420,nk=420,d=64,causal=no", "sm_90a"), one64);
  EXPECT_EQ(key("b=1,hq=12,hkv=12,nq=5000,nk=5000,d=64,causal=yes", "sm_90a"),
            std::string(three) + ",persistent=1");
  EXPECT_EQ(key("b=1,hq=12,hkv=12,nq=5000,nk=5000,d=64,causal=no", "sm_90a"), three);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=1024,nk=1024,d=64,causal=no", "sm_90a"),
            std::string(three) + ",persistent=1");
  // With a window the 192-row tiles of 128 keys spill: the 128-row row below it.
  EXPECT_EQ(key("b=1,hq=12,hkv=12,nq=5000,nk=5000,d=64,causal=yes,window=512", "sm_90a"),
            std::string(two) + ",persistent=1");
  // The A100 keeps the mma.sync rows and the short-grid rule.
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=64,nk=8192,d=128,causal=yes", "sm_80"),
            "block_m=64,block_n=128,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0");
  // Varlen: the wgmma rows without their persistent grid.
  EXPECT_EQ(key("b=1,hq=12,hkv=12,nq=5000,nk=5000,d=64,causal=yes,varlen=yes", "sm_90a"),
            three);
  // d=256: two consumers of 80-key tiles taking turns, two stages, K and V freed apart (not
  // persistent: that spills), with or without a mask, masks and variants included ...
  const char* apart256 = "block_m=128,block_n=80,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,"
                         "pingpong=1,kv_apart=1";
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=no", "sm_90a"), apart256);
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=yes", "sm_90a"), apart256);
  EXPECT_EQ(key("b=1,hq=32,hkv=8,nq=777,nk=777,d=256,causal=no", "sm_90a"), apart256);
  EXPECT_EQ(key("b=2,hq=8,hkv=8,nq=4096,nk=4096,d=256,causal=yes,softcap=yes", "sm_90a"),
            apart256);
  // (with a window or ALiBi they spill: the one-consumer row below, persistent)
  EXPECT_EQ(key("b=2,hq=8,hkv=8,nq=4096,nk=4096,d=256,causal=yes,window=512,softcap=yes,"
                "alibi=yes",
                "sm_90a"),
            std::string(one64) + ",persistent=1");
  // ... one consumer's 64-row tiles of 80 keys where 128-row tiles fill at most half the SMs
  // (1 x 2 x 20; 1 x 16 x 1), and under a causal mask where they are fewer than two waves
  // (1 x 8 x 24 = 192 < 264: persistent, 384 tiles of 64 rows; not 4 x 16 x 5 = 320) ...
  const char* one256 = "block_m=64,block_n=80,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1,"
                       "kv_apart=1";
  EXPECT_EQ(key("b=1,hq=2,hkv=2,nq=2560,nk=4096,d=256,causal=no", "sm_90a"), one256);
  EXPECT_EQ(key("b=1,hq=16,hkv=4,nq=100,nk=2000,d=256,causal=no", "sm_90a"), one256);
  EXPECT_EQ(key("b=1,hq=8,hkv=8,nq=3000,nk=3000,d=256,causal=yes", "sm_90a"),
            "block_m=64,block_n=80,warps=8,stages=2,q_regs=0,smem_pad=0,impl=1,persistent=1,"
            "kv_apart=1");
  EXPECT_EQ(key("b=4,hq=16,hkv=16,nq=640,nk=640,d=256,causal=yes", "sm_90a"), apart256);
  // ... and where K and V cannot be freed apart, the earlier rows: one consumer's 64-key tiles
  // in 3 stages paged (not persistent under a causal mask), two consumers taking turns varlen.
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=yes,page=64", "sm_90a"), one64);
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=no,page=64", "sm_90a"),
            std::string(one64) + ",persistent=1");
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=no,varlen=yes", "sm_90a"),
            "block_m=128,block_n=64,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  // d=96 on Hopper: d=128's wgmma rules (since 2026-12-04). d=32: its Hopper row (measured
  // fastest); a short grid there is not halved.
  EXPECT_EQ(key("b=2,hq=24,hkv=24,nq=4096,nk=4096,d=96,causal=no", "sm_90a"),
            "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
            "persistent=1");
  EXPECT_EQ(key("b=1,hq=4,hkv=4,nq=300,nk=300,d=32,causal=no", "sm_90a"),
            "block_m=128,block_n=128,warps=4,stages=3,q_regs=1,smem_pad=0,impl=0");
  EXPECT_EQ(key("b=2,hq=24,hkv=24,nq=4096,nk=4096,d=96,causal=no", "sm_80"),
            "block_m=128,block_n=64,warps=8,stages=2,q_regs=1,smem_pad=0,impl=0");
  // sm_80 keeps its rows (d=256 in 128 KiB of its 163 KiB).
  EXPECT_EQ(key("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=256,causal=no", "sm_80"),
            "block_m=128,block_n=32,warps=8,stages=2,q_regs=0,smem_pad=0,impl=0");
}

// d=64 on an H200-like device (36 GB/s of memory per SM; the H100's 25 keep their rows): where
// one consumer's 64-row tiles would run only because 192-row tiles pad more than a quarter of
// the rows, 192 or 128 rows by their waves on 132 SMs (a 192-row wave costing 1.5), equal costs
// by padded rows, 192 on a tie (d64_tile_height, read from H200 sweeps of 2026-12-03).
TEST(AttentionProblem, D64DefaultsOnH200LikeDevices) {
  DeviceInfo h200 = device("sm_90a");
  h200.memory_bandwidth = 4'800'000'000'000;
  DeviceInfo h100 = device("sm_90a");
  h100.memory_bandwidth = 3'350'000'000'000;
  const auto key = [](const char* shape, const DeviceInfo& dev) {
    const Problem p = op().parse_problem(shape);
    const Params d = op().default_params(p, DType::bf16, dev);
    EXPECT_EQ(op().invalid_reason(d, p, DType::bf16, dev), std::nullopt) << shape;
    return op().params_key(d);
  };
  const std::string tall = "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,"
                           "persistent=1";
  const std::string two = "block_m=128,block_n=128,warps=12,stages=2,q_regs=0,smem_pad=0,impl=1,"
                          "pingpong=1,persistent=1,kv_apart=1";
  const std::string one64 = "block_m=64,block_n=64,warps=8,stages=3,q_regs=0,smem_pad=0,impl=1";
  // 300 rows over 128 heads: two waves of 192-row tiles cost as much as three of 128 (3 each)
  // and pad to 384 either way: 192, in 64-key tiles without turns up to 1023 keys, from 1024
  // the row's 128-key tiles taking turns. 130 rows over 128 heads: one wave (1.5) against two.
  const std::string tall_long = "block_m=192,block_n=128,warps=16,stages=3,q_regs=0,smem_pad=0,"
                                "impl=1,pingpong=1,persistent=1";
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=300,d=64,causal=no", h200), tall);
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=1023,d=64,causal=no", h200), tall);
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=1024,d=64,causal=no", h200), tall_long);
  EXPECT_EQ(key("b=16,hq=8,hkv=8,nq=130,nk=2000,d=64,causal=yes", h200), tall_long);
  // 200 rows over 96 heads, 400 over 96: as many waves of either height (cost 1.5 against 1).
  EXPECT_EQ(key("b=2,hq=48,hkv=8,nq=200,nk=2000,d=64,causal=no", h200), two);
  // 128 rows take 64-key tiles where one 128-key tile would hold every key, under a causal
  // mask up to 256 keys, and up to 320 keys where they pad fewer keys than 128-key tiles.
  const std::string two64 = "block_m=128,block_n=64,warps=12,stages=2,q_regs=0,smem_pad=0,"
                            "impl=1,pingpong=1,persistent=1,kv_apart=1";
  EXPECT_EQ(key("b=3,hq=32,hkv=32,nq=400,nk=400,d=64,causal=yes", h200), two);
  EXPECT_EQ(key("b=12,hq=24,hkv=24,nq=230,nk=256,d=64,causal=yes", h200), two64);
  EXPECT_EQ(key("b=12,hq=24,hkv=24,nq=230,nk=257,d=64,causal=yes", h200), two64);
  EXPECT_EQ(key("b=12,hq=24,hkv=24,nq=230,nk=320,d=64,causal=yes", h200), two64);
  EXPECT_EQ(key("b=12,hq=24,hkv=24,nq=230,nk=321,d=64,causal=yes", h200), two);
  EXPECT_EQ(key("b=3,hq=32,hkv=32,nq=400,nk=400,d=64,causal=no", h200), two);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=128,d=64,causal=no", h200), two64);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=129,d=64,causal=no", h200), two64);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=192,d=64,causal=no", h200), two64);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=193,d=64,causal=no", h200), two);  // 256 either way
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=256,d=64,causal=no", h200), two);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=257,d=64,causal=no", h200), two64);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=320,d=64,causal=no", h200), two64);
  EXPECT_EQ(key("b=16,hq=16,hkv=16,nq=128,nk=321,d=64,causal=no", h200), two);
  EXPECT_EQ(key("b=4,hq=40,hkv=8,nq=400,nk=430,d=64,causal=no", h200), two);  // 448 < 512, > 320
  // 290 rows pad to 384 either way, but 160 tiles of 192 rows take two waves (cost 3) where 240
  // of 128 take two (cost 2): 128.
  EXPECT_EQ(key("b=1,hq=80,hkv=8,nq=290,nk=2000,d=64,causal=no", h200), two);
  // The H100, and a device of unknown bandwidth, keep one consumer.
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=1300,d=64,causal=no", h100), one64);
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=1300,d=64,causal=no", device("sm_90a")), one64);
  EXPECT_EQ(key("b=4,hq=32,hkv=8,nq=300,nk=1300,d=64,causal=no", h200), tall_long);
  // Not reached: 192-row tiles padding a quarter or less (500 in 576), a short grid (2 x 8 x 3
  // tiles of 128 rows), 128-row tiles filling at most 3/4 of the SMs (96 and 80), d=128, a
  // window, a paged cache: the same default as the H100's.
  for (const char* shape :
       {"b=8,hq=16,hkv=16,nq=500,nk=500,d=64,causal=yes",
        "b=2,hq=8,hkv=8,nq=300,nk=2000,d=64,causal=no",
        "b=3,hq=16,hkv=16,nq=140,nk=140,d=64,causal=no",
        "b=1,hq=40,hkv=8,nq=130,nk=1300,d=64,causal=yes",
        "b=4,hq=32,hkv=8,nq=300,nk=2000,d=128,causal=no",
        "b=4,hq=32,hkv=8,nq=300,nk=2000,d=64,causal=no,window=256",
        "b=4,hq=32,hkv=8,nq=300,nk=2000,d=64,causal=no,page=64"})
    EXPECT_EQ(key(shape, h200), key(shape, h100)) << shape;
}

TEST(AttentionProblem, VariantDimsAndTheLookupsRules) {
  const std::vector<DimSpec>& dims = op().dims();
  ASSERT_EQ(dims.size(), 12u);
  const char* names[] = {"b",      "hq",     "hkv",     "nq",    "nk",     "d",
                         "causal", "window", "softcap", "alibi", "varlen", "page"};
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(dims[i].name, names[i]);
  // Window: by distance, with no window (0) a regime of its own; softcap and alibi exact.
  EXPECT_FALSE(dims[7].matched_exactly());
  EXPECT_EQ(dims[7].regime(0), 0);
  EXPECT_EQ(dims[7].regime(1), 1);
  EXPECT_EQ(dims[7].regime(4096), dims[7].regime(8192));
  EXPECT_TRUE(dims[8].matched_exactly());
  EXPECT_TRUE(dims[9].matched_exactly());
  EXPECT_EQ(dims[7].def, 0);
  EXPECT_EQ(dims[8].def, 0);
  EXPECT_EQ(dims[9].def, 0);
  // varlen: exact (a packed batch is never served by a padded one's row, nor the reverse), off
  // by default and then left out of keys.
  EXPECT_TRUE(dims[10].matched_exactly());
  EXPECT_EQ(dims[10].def, 0);
  // page: exact likewise (a paged cache's kernels copy through the block table).
  EXPECT_TRUE(dims[11].matched_exactly());
  EXPECT_EQ(dims[11].def, 0);
  for (std::size_t i = 7; i < 12; ++i) EXPECT_FALSE(dims[i].keyed_at_default) << dims[i].name;
}

TEST(AttentionProblem, VarlenIsInTheKeyOnlyWhenOn) {
  const Problem p = op().parse_problem("varlen=yes,b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=yes");
  EXPECT_EQ(p.values, (std::vector<std::int64_t>{3, 8, 2, 200, 300, 64, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(op().problem_key(p), "b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=yes,varlen=yes");
  EXPECT_EQ(op().parse_problem(op().problem_key(p)), p);
  const Problem all = op().parse_problem(
      "b=3,hq=8,hkv=2,nq=200,nk=300,d=64,window=64,softcap=yes,alibi=yes,varlen=yes");
  EXPECT_EQ(op().problem_key(all),
            "b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=no,window=64,softcap=yes,alibi=yes,"
            "varlen=yes");
  Problem off = p;
  off.values[10] = 0;
  EXPECT_EQ(op().problem_key(off), "b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=yes");
}

// A paged cache: the pools, block table and lengths as tensors; every page size through both
// kernels' names (and the reference's); the defaults: never persistent under a causal mask,
// 16 query rows per warp on mma.sync, and what no kernel takes refused with a reason.
TEST(AttentionProblem, PagedProblemsTensorsKernelsAndDefaults) {
  const Problem p = op().parse_problem("b=3,hq=8,hkv=2,nq=200,nk=1000,d=128,causal=yes,page=16");
  EXPECT_EQ(op().problem_key(p), "b=3,hq=8,hkv=2,nq=200,nk=1000,d=128,causal=yes,page=16");
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  std::vector<std::string> names;
  for (const TensorSpec& t : ts) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"q", "k_cache", "v_cache", "o", "lse",
                                             "alibi_slopes", "block_table", "seq_lens"}));
  EXPECT_EQ(ts[1].elements, 3 * 63 * 16 * 2 * 128);  // b x ceil(1000 / 16) pages of 16 rows
  EXPECT_EQ(ts[6].elements, 3 * 63);
  EXPECT_EQ(ts[6].fill.kind, Fill::Kind::permutation);
  EXPECT_EQ(ts[7].fill.kind, Fill::Kind::uniform_int);
  EXPECT_EQ(ts[7].fill.first_int, 500);
  EXPECT_EQ(ts[7].fill.last_int, 1000);
  // Packed queries: cu_seqlens_q before the table, no cu_seqlens_k.
  const Problem packed = op().parse_problem(
      "b=3,hq=8,hkv=2,nq=200,nk=1000,d=128,causal=yes,page=16,varlen=yes");
  names.clear();
  for (const TensorSpec& t : op().tensors(packed, DType::bf16)) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"q", "k_cache", "v_cache", "o", "lse",
                                             "alibi_slopes", "cu_seqlens_q", "block_table",
                                             "seq_lens"}));
  // A long chunk of a causal prefill: the contiguous problem's tiles, one CTA per tile.
  const Problem big =
      op().parse_problem("b=4,hq=32,hkv=8,nq=2048,nk=4096,d=128,causal=yes,page=16");
  const Params wgmma = op().default_params(big, DType::bf16, device("sm_90a"));
  EXPECT_EQ(op().params_key(wgmma),
            "block_m=192,block_n=64,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1");
  EXPECT_EQ(op().kernels(wgmma, big, DType::bf16)[0].name_expression,
            "ktune::flash_attention_sm90<ktune::bf16, 128, 64, 3, 3, false, true, false, false, "
            "false, false, true, false, 16>");
  const Problem open = op().parse_problem("b=3,hq=8,hkv=2,nq=2000,nk=2000,d=128,page=256");
  EXPECT_NE(op().params_key(op().default_params(open, DType::bf16, device("sm_90a")))
                .find("persistent=1"),
            std::string::npos);
  const Params mma = op().default_params(big, DType::bf16, device("sm_80"));
  EXPECT_EQ(op().params_key(mma), "block_m=128,block_n=64,warps=8,stages=2,q_regs=0,smem_pad=0,"
                                  "impl=0");
  EXPECT_EQ(op().kernels(mma, big, DType::bf16)[0].name_expression,
            "ktune::flash_attention_fwd<ktune::bf16, 128, 128, 64, 8, 2, true, false, 1, false, "
            "false, false, false, false, 16>");
  EXPECT_EQ(op().reference_kernels(packed, DType::bf16)[0].name_expression,
            "ktune::flash_attention_reference<ktune::bf16, 128, true, false, false, false, true, "
            "16>");
  EXPECT_EQ(op().dynamic_shared_bytes(mma, big, DType::bf16, 0),
            flash_attention_smem_bytes(128, 128, 64, 2) + 2 * 4 * 4);  // two slots of 4 ids
  EXPECT_EQ(op().invalid_reason(op().parse_params("block_m=192,block_n=64,warps=16,stages=3,"
                                                  "q_regs=0,smem_pad=0,impl=1,persistent=1"),
                                p, DType::bf16, device("sm_90a")),
            "impl=1 persistent with a paged cache and 3 consumer warpgroups at d=128 spills (the "
            "producer's 32 registers); block_m=64 or 128, or persistent=0");
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=100,d=64,page=24"),
                       "page=24 is not a supported page size"));
}

TEST(AttentionProblem, BadProblemsSayWhy) {
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,window=-1"),
                       "window=-1 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,softcap=30"),
                       "softcap=\"30\" is not one of no, yes"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,alibi=1"),
                       "alibi=\"1\" is not one of no, yes"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=84"),
                       "d=84 is not a multiple of 8 (rows of 16-byte chunks; 8 to 256)"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=264"), "d=264 is out of range"));
  EXPECT_EQ(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=80"), "");  // in d=96's tiles
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=3,nq=1,nk=1,d=64"),
                       "hq=8 is not a multiple of hkv=3"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=2,hkv=4,nq=1,nk=1,d=64"),
                       "hq=2 is not a multiple of hkv=4"));
  EXPECT_TRUE(contains(problem_error("b=4096,hq=32,hkv=8,nq=1,nk=1,d=64"),
                       "b=4096 x hq=32 = 131072 (batch, head) pairs; the grid allows at most 65535"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=0,nk=1,d=64"), "nq=0 is out of range"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=2000000000,d=64"),
                       "nk=2000000000 is out of range (allowed 1..1073741824)"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,nq=1,nk=1,d=64"), "missing dimension hkv"));
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,causal=maybe"),
                       "causal=\"maybe\" is not one of no, yes"));
  EXPECT_EQ(problem_error("b=1,hq=65535,hkv=1,nq=1,nk=1,d=256,causal=yes"), "");
  EXPECT_TRUE(contains(problem_error("b=1,hq=8,hkv=8,nq=1,nk=1,d=64,varlen=1"),
                       "varlen=\"1\" is not one of no, yes"));
  // varlen: int32 offsets, and packed rows of hq * d elements below the 2^23 row stride limit.
  EXPECT_TRUE(contains(problem_error("b=3,hq=8,hkv=8,nq=1073741824,nk=1,d=64,varlen=yes"),
                       "varlen=yes with b=3 sequences of up to 1073741824 rows: offsets up to "
                       "3221225472 do not fit int32 (at most 2147483647)"));
  EXPECT_EQ(problem_error("b=3,hq=8,hkv=8,nq=1073741824,nk=1,d=64"), "");
  EXPECT_TRUE(contains(problem_error("b=1,hq=32768,hkv=1,nq=1,nk=1,d=256,varlen=yes"),
                       "varlen=yes packs rows of hq=32768 x d=256 = 8388608 elements; row "
                       "strides must stay below 2^23"));
  EXPECT_EQ(problem_error("b=1,hq=32767,hkv=1,nq=1,nk=1,d=256,varlen=yes"), "");
  // check_problem applies the same rules to a problem built by hand (the runtime's path).
  Problem p = op().parse_problem("b=1,hq=8,hkv=8,nq=1,nk=1,d=64");
  p.values[5] = 44;
  EXPECT_TRUE(contains(run_error([&] { op().check_problem(p); }), "d=44"));
}

// ---- defaults ----

TEST(AttentionDefaults, ValidForEveryShapeDtypeAndArch) {
  DeviceInfo small = device("sm_80");  // an sm_86-like part: 99 KiB of shared memory per block
  small.cc_minor = 6;
  small.smem_optin_per_block = 99 * 1024;
  std::vector<DeviceInfo> devices{device("sm_80"), device("sm_90a"), small};
  for (const DeviceInfo& dev : devices)
    for (DType t : {DType::bf16, DType::f16, DType::e4m3})
      for (std::int64_t d : {32, 64, 96, 128, 256})
        for (const char* dims : {"b=1,hq=1,hkv=1,nq=1,nk=1", "b=2,hq=16,hkv=16,nq=4096,nk=4096",
                                 "b=3,hq=8,hkv=2,nq=17,nk=1000", "b=1,hq=32,hkv=1,nq=32768,nk=7"})
          for (const char* causal : {"no", "yes"}) {
            const Problem p = op().parse_problem(std::string(dims) + ",d=" + std::to_string(d) +
                                                 ",causal=" + causal);
            // e4m3: sm_90a at d = 128 and 256 only.
            if (t == DType::e4m3 && (dev.cc_major != 9 || (d != 128 && d != 256))) continue;
            const Params params = op().default_params(p, t, dev);
            EXPECT_EQ(op().invalid_reason(params, p, t, dev), std::nullopt)
                << dev.name << " " << dtype_name(t) << " " << op().problem_key(p) << ": "
                << op().params_key(params);
          }
}

TEST(AttentionDefaults, AreTheMeasuredBestOnH100) {
  const DeviceInfo h100 = device("sm_90a");
  EXPECT_EQ(op().params_key(op().default_params(op().default_problem(), DType::bf16, h100)),
            "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1,"
            "persistent=1");
  const Problem d64 = op().parse_problem("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=64");
  EXPECT_EQ(op().params_key(op().default_params(d64, DType::bf16, h100)),
            "block_m=192,block_n=128,warps=16,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1");
  // The A100 keeps the mma.sync rows.
  EXPECT_EQ(op().params_key(op().default_params(d64, DType::bf16, device("sm_80"))),
            "block_m=128,block_n=64,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0");
  // d=256 on a part with 99 KiB per block falls back to the smallest tiles.
  DeviceInfo small = device("sm_80");
  small.smem_optin_per_block = 99 * 1024;
  const Problem d256 = op().parse_problem("b=1,hq=16,hkv=16,nq=512,nk=512,d=256");
  EXPECT_EQ(op().params_key(op().default_params(d256, DType::bf16, small)),
            "block_m=64,block_n=32,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0");
}

// ---- the rest of the interface ----

TEST(AttentionOp, TensorsBytesFlopsTolerance) {
  const Problem p = op().parse_problem("b=2,hq=8,hkv=2,nq=100,nk=300,d=64");
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  ASSERT_EQ(ts.size(), 6u);
  const char* names[] = {"q", "k", "v", "o", "lse", "alibi_slopes"};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(ts[i].name, names[i]);
  // The slopes: [hq] fp32, optional unless alibi=yes, filled with positive slopes below 1.
  EXPECT_EQ(ts[5].role, TensorRole::input);
  EXPECT_EQ(ts[5].dtype, DType::f32);
  EXPECT_EQ(ts[5].elements, 8);
  EXPECT_TRUE(ts[5].optional);
  EXPECT_GT(ts[5].fill.lo, 0.f);
  EXPECT_LE(ts[5].fill.hi, 1.f);
  const Problem alibi = op().parse_problem("b=2,hq=8,hkv=2,nq=100,nk=300,d=64,alibi=yes");
  EXPECT_FALSE(op().tensors(alibi, DType::bf16)[5].optional);
  EXPECT_DOUBLE_EQ(op().min_bytes(alibi, DType::bf16) - op().min_bytes(p, DType::bf16), 4.0 * 8);
  EXPECT_EQ(ts[0].elements, 2 * 8 * 100 * 64);
  EXPECT_EQ(ts[1].elements, 2 * 2 * 300 * 64);
  EXPECT_EQ(ts[3].role, TensorRole::output);
  EXPECT_EQ(ts[4].dtype, DType::f32);
  EXPECT_EQ(ts[4].elements, 2 * 8 * 100);
  EXPECT_TRUE(ts[4].optional);
  EXPECT_FALSE(ts[3].optional);
  // q, k, v read once, o written once (2 bytes each), lse written once (4 bytes).
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   2.0 * (2 * 2 * 8 * 100 * 64 + 2 * 2 * 2 * 300 * 64) + 4.0 * 2 * 8 * 100);
  EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 2 * 8 * 100 * 300 * 64);
  EXPECT_EQ(op().alignment(op().default_params(p, DType::bf16, device("sm_90a")), p, DType::bf16),
            16u);
  EXPECT_DOUBLE_EQ(op().tolerance(DType::bf16).rtol, 2e-2);
  EXPECT_DOUBLE_EQ(op().tolerance(DType::f16).atol, 5e-3);
  ASSERT_EQ(op().scalars().size(), 5u);
  EXPECT_EQ(op().scalars()[0].name, "scale");
  EXPECT_EQ(op().scalars()[1].name, "softcap");
  EXPECT_DOUBLE_EQ(op().scalars()[1].tuning_value, 50.0);
  // e4m3's dequantisation scales, tuned at values other than 1 so that verification sees them.
  EXPECT_EQ(op().scalars()[2].name, "q_scale");
  EXPECT_EQ(op().scalars()[4].name, "v_scale");
  EXPECT_NE(op().scalars()[4].tuning_value, 1.0);
}

TEST(AttentionOp, CausalFlopsCountTheVisiblePairsExactly) {
  // Brute-force count of (row, key) pairs with key <= row + nk - nq.
  const auto pairs = [](std::int64_t nq, std::int64_t nk) {
    double n = 0;
    for (std::int64_t i = 0; i < nq; ++i)
      for (std::int64_t j = 0; j < nk; ++j) n += j <= i + nk - nq;
    return n;
  };
  for (auto [nq, nk] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 7}, {5, 12}, {12, 5},
                        {1, 1000}, {1000, 1}, {4096, 4096}, {333, 4097}}) {
    const Problem p = op().parse_problem("b=3,hq=4,hkv=2,nq=" + std::to_string(nq) + ",nk=" +
                                         std::to_string(nk) + ",d=32,causal=yes");
    EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 3 * 4 * 32 * pairs(nq, nk))
        << nq << " " << nk;
  }
  // Square: N (N + 1) / 2 pairs, about half of the non-causal count.
  const Problem sq = op().parse_problem("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=yes");
  EXPECT_DOUBLE_EQ(op().flops(sq, DType::bf16), 4.0 * 16 * 128 * 8192.0 * 8193 / 2);
}

TEST(AttentionOp, WindowFlopsCountTheVisiblePairsExactly) {
  // Brute force: key j is seen by row i when j > i' - window (and j <= i' if causal), i' the
  // bottom-right aligned row. Softcap and ALiBi change no count.
  const auto pairs = [](std::int64_t nq, std::int64_t nk, bool causal, std::int64_t w) {
    double n = 0;
    for (std::int64_t i = 0; i < nq; ++i)
      for (std::int64_t j = 0; j < nk; ++j) {
        const std::int64_t at = i + nk - nq;
        n += (!causal || j <= at) && j > at - w;
      }
    return n;
  };
  for (auto [nq, nk] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 7}, {5, 12}, {12, 5},
                        {1, 1000}, {1000, 1}, {333, 417}})
    for (bool causal : {false, true})
      for (std::int64_t w : {1, 2, 5, 64, 999, 5000}) {
        const Problem p = op().parse_problem(
            "b=3,hq=4,hkv=2,nq=" + std::to_string(nq) + ",nk=" + std::to_string(nk) +
            ",d=32,softcap=yes,alibi=yes,window=" + std::to_string(w) +
            (causal ? ",causal=yes" : ""));
        EXPECT_DOUBLE_EQ(op().flops(p, DType::bf16), 4.0 * 3 * 4 * 32 * pairs(nq, nk, causal, w))
            << nq << " " << nk << " " << causal << " " << w;
      }
  // The bar's shape: window 4096 on 16k causal does 2.286x fewer pairs than full causal.
  const Problem full = op().parse_problem("b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128,causal=yes");
  const Problem win =
      op().parse_problem("b=1,hq=16,hkv=16,nq=16384,nk=16384,d=128,causal=yes,window=4096");
  const double n = 16384, w = 4096;
  EXPECT_DOUBLE_EQ(op().flops(win, DType::bf16), 4.0 * 16 * 128 * (w * (w + 1) / 2 + (n - w) * w));
  EXPECT_NEAR(op().flops(full, DType::bf16) / op().flops(win, DType::bf16), 2.286, 1e-3);
}

TEST(AttentionOp, SourceFilesAreTheFamilyAndWhatItIncludes) {
  const std::vector<std::string_view> files = op().source_files();
  const auto has = [&](std::string_view f) {
    return std::find(files.begin(), files.end(), f) != files.end();
  };
  EXPECT_TRUE(has("attention/flash_attention.cuh"));
  EXPECT_TRUE(has("attention/mma.cuh"));
  EXPECT_TRUE(has("common/types.cuh"));  // included by the kernels
  for (std::string_view f : files) {
    EXPECT_EQ(f.substr(0, 6) == "fused/" || f.substr(0, 4) == "moe/", false) << f;
    EXPECT_NE(f, "common/check.cuh") << "the verification kernels are not the op's code";
  }
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  // A fused op's hash does not cover attention's code.
  for (std::string_view f : get_op("add_rmsnorm").source_files())
    EXPECT_NE(f.substr(0, 10), "attention/") << f;
}

TEST(AttentionOp, TemplateHashCoversTheAttentionSources) {
  EXPECT_EQ(op().template_hash().size(), 64u);
  for (const Op* other : all_ops()) {
    if (other == &op()) continue;
    EXPECT_NE(other->template_hash(), op().template_hash()) << other->name();
  }
}

TEST(AttentionOp, VarlenTensorsArePackedForTheTunersOffsets) {
  const Problem p = op().parse_problem("b=5,hq=8,hkv=2,nq=100,nk=300,d=64,causal=yes,varlen=yes");
  const std::vector<TensorSpec> ts = op().tensors(p, DType::bf16);
  ASSERT_EQ(ts.size(), 8u);
  const char* names[] = {"q", "k", "v", "o", "lse", "alibi_slopes", "cu_seqlens_q",
                         "cu_seqlens_k"};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(ts[i].name, names[i]);
  for (std::size_t i : {std::size_t{6}, std::size_t{7}}) {
    EXPECT_EQ(ts[i].role, TensorRole::input);
    EXPECT_EQ(ts[i].dtype, DType::i32);
    EXPECT_EQ(ts[i].elements, 6);
    EXPECT_FALSE(ts[i].optional);
    EXPECT_EQ(ts[i].fill.kind, Fill::Kind::seq_offsets);
    EXPECT_EQ(ts[i].fill.first_int, 1);
  }
  EXPECT_EQ(ts[6].fill.last_int, 100);
  EXPECT_EQ(ts[7].fill.last_int, 300);
  // The tuner's offsets: from 0, every length in [1, n], the first the longest and the second
  // the shortest; the same every call.
  const std::vector<std::int64_t> cq = offsets_of(ts[6].fill, 6);
  const std::vector<std::int64_t> ck = offsets_of(ts[7].fill, 6);
  ASSERT_EQ(cq.size(), 6u);
  ASSERT_EQ(ck.size(), 6u);
  EXPECT_EQ(cq[0], 0);
  EXPECT_EQ(ck[0], 0);
  EXPECT_EQ(cq[1], 100);
  EXPECT_EQ(cq[2], 101);
  EXPECT_EQ(ck[1], 300);
  EXPECT_EQ(ck[2] - ck[1], 1);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_GE(cq[i + 1] - cq[i], 1);
    EXPECT_LE(cq[i + 1] - cq[i], 100);
    EXPECT_GE(ck[i + 1] - ck[i], 1);
    EXPECT_LE(ck[i + 1] - ck[i], 300);
  }
  EXPECT_EQ(offsets_of(ts[6].fill, 6), cq);
  // The packed tensors hold exactly the offsets' rows: the tuner compares whole outputs, and a
  // row past total_q would be written by nobody.
  const std::int64_t total_q = cq.back(), total_k = ck.back();
  EXPECT_LT(total_q, 5 * 100);
  EXPECT_EQ(ts[0].elements, total_q * 8 * 64);
  EXPECT_EQ(ts[1].elements, total_k * 2 * 64);
  EXPECT_EQ(ts[2].elements, total_k * 2 * 64);
  EXPECT_EQ(ts[3].elements, total_q * 8 * 64);
  EXPECT_EQ(ts[4].elements, 8 * total_q);  // [hq, total_q]
  EXPECT_DOUBLE_EQ(op().min_bytes(p, DType::bf16),
                   static_cast<double>(2 * (2 * total_q * 8 * 64 + 2 * total_k * 2 * 64) +
                                       4 * 8 * total_q + 2 * 4 * 6));
  // With nq = nk every sequence has as many keys as queries (one seed for both).
  const Problem square = op().parse_problem("b=4,hq=2,hkv=2,nq=77,nk=77,d=32,varlen=yes");
  const std::vector<TensorSpec> sq = op().tensors(square, DType::f16);
  EXPECT_EQ(offsets_of(sq[6].fill, 5), offsets_of(sq[7].fill, 5));

  // Flops: the visible pairs of each sequence with its own lengths, brute force.
  const auto pairs = [](std::int64_t nq, std::int64_t nk, bool causal, std::int64_t w) {
    double n = 0;
    for (std::int64_t i = 0; i < nq; ++i)
      for (std::int64_t j = 0; j < nk; ++j) {
        const std::int64_t at = i + nk - nq;
        n += (!causal || j <= at) && (w == 0 || j > at - w);
      }
    return n;
  };
  for (const char* extra : {"", ",causal=yes", ",window=40", ",causal=yes,window=7"}) {
    const Problem v = op().parse_problem(std::string("b=5,hq=8,hkv=2,nq=100,nk=300,d=64,"
                                                     "varlen=yes") + extra);
    const bool causal = op().dim(v, "causal") != 0;
    const std::int64_t w = op().dim(v, "window");
    double n = 0;
    for (std::size_t i = 0; i < 5; ++i) n += pairs(cq[i + 1] - cq[i], ck[i + 1] - ck[i], causal, w);
    EXPECT_DOUBLE_EQ(op().flops(v, DType::bf16), 4.0 * 8 * 64 * n) << extra;
  }
}

}  // namespace
}  // namespace ktune
