// The flash attention op's launches through a recording launcher: geometry, strides from the
// layout, the reference over every row, the mask variants' and varlen's arguments, name
// expressions.
#include "tests/attention_test_support.hpp"

namespace ktune {
namespace {

using namespace attention_test;

// ---- launches ----

TEST(AttentionRun, LaunchGeometryAndContiguousStrides) {
  const Problem p = op().parse_problem("b=3,hq=8,hkv=2,nq=1000,nk=17,d=64,causal=yes");
  const Params params =
      op().parse_params("block_m=128,block_n=32,warps=8,stages=3,q_regs=1,smem_pad=1,impl=0");
  const RecordingLauncher l = run(params, p);
  ASSERT_EQ(l.launches.size(), 1u);
  const KernelLaunch& k = l.launches[0];
  EXPECT_EQ(k.kernel, reinterpret_cast<KernelHandle>(0x100));
  EXPECT_EQ(k.grid[0], 8u);  // ceil(1000 / 128)
  EXPECT_EQ(k.grid[1], 24u);  // b * hq
  EXPECT_EQ(k.grid[2], 1u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(k.block[1], 1u);
  EXPECT_EQ(static_cast<int>(k.block[0]), op().block_threads(params, p, DType::bf16, 0));
  // Q tile + 3 stages of K and V tiles, rows of 64 * 2 + 16 bytes.
  EXPECT_EQ(k.shared_bytes, (128u + 2 * 32 * 3) * 144);
  EXPECT_EQ(k.shared_bytes, op().dynamic_shared_bytes(params, p, DType::bf16, 0));
  const FlashAttentionArgs& a = l.args[0];
  EXPECT_EQ(a.q, reinterpret_cast<const void*>(0x10000));
  EXPECT_EQ(a.k, reinterpret_cast<const void*>(0x20000));
  EXPECT_EQ(a.v, reinterpret_cast<const void*>(0x30000));
  EXPECT_EQ(a.o, reinterpret_cast<void*>(0x40000));
  EXPECT_EQ(a.lse, reinterpret_cast<float*>(0x50000));
  EXPECT_EQ(a.q_batch_stride, 8 * 1000 * 64);
  EXPECT_EQ(a.q_head_stride, 1000 * 64);
  EXPECT_EQ(a.q_row_stride, 64);
  EXPECT_EQ(a.k_batch_stride, 2 * 17 * 64);
  EXPECT_EQ(a.v_head_stride, 17 * 64);
  EXPECT_EQ(a.o_batch_stride, a.q_batch_stride);
  EXPECT_EQ(a.o_row_stride, 64);
  EXPECT_EQ(a.batch, 3);
  EXPECT_EQ(a.heads_q, 8);
  EXPECT_EQ(a.heads_kv, 2);
  EXPECT_EQ(a.seq_q, 1000);
  EXPECT_EQ(a.seq_k, 17);
  EXPECT_FLOAT_EQ(a.scale, 0.125f);  // 1/sqrt(64) when scale <= 0
  EXPECT_FLOAT_EQ(run(params, p, 0.3).args[0].scale, 0.3f);
  EXPECT_FLOAT_EQ(run(params, p, -1.0).args[0].scale, 0.125f);
  EXPECT_TRUE(contains(
      run_error([&] { run(params, p, std::numeric_limits<double>::infinity()); }), "not finite"));
}

TEST(AttentionRun, StridesComeFromTheLayout) {
  const Problem p = op().parse_problem("b=2,hq=4,hkv=1,nq=17,nk=33,d=128");
  const Params params = op().default_params(p, DType::bf16, device("sm_80"));
  // [B, S, H, D] for q and o, [B, H, S, D] for k and v, with a padded batch stride.
  std::int64_t layout[12] = {17 * 4 * 128 + 8, 128, 4 * 128, 33 * 128, 33 * 128, 128,
                             33 * 128,         33 * 128, 128, 17 * 4 * 128, 128, 4 * 128};
  const FlashAttentionArgs a = run(params, p, 0, layout).args[0];
  EXPECT_EQ(a.q_batch_stride, 17 * 4 * 128 + 8);
  EXPECT_EQ(a.q_head_stride, 128);
  EXPECT_EQ(a.q_row_stride, 4 * 128);
  EXPECT_EQ(a.k_head_stride, 33 * 128);
  EXPECT_EQ(a.v_row_stride, 128);
  EXPECT_EQ(a.o_head_stride, 128);
  EXPECT_EQ(a.o_row_stride, 512);
  EXPECT_EQ(op().layout_size(), 12u);

  // Every stride is checked; the message names the tensor and dimension.
  layout[5] = 100;  // k seq
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }),
                       "flash_attention: k seq stride 100 must be a positive multiple of 8 "
                       "elements (rows start 16-byte aligned) below 2^23"));
  layout[5] = std::int64_t{1} << 23;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }), "k seq stride 8388608"));
  layout[5] = 0;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }), "k seq stride 0"));
  layout[5] = 128;
  layout[9] = -8;  // o batch
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }),
                       "o batch stride -8 must be a non-negative multiple of 8"));
  // An input broadcast over the batch is fine; an output's zero stride would write every
  // sequence (or head) to one place.
  layout[9] = 17 * 4 * 128;
  layout[0] = 0;
  EXPECT_EQ(run(params, p, 0, layout).args[0].q_batch_stride, 0);
  layout[9] = 0;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }),
                       "flash_attention: o batch stride 0 over 2 sequences would write them all "
                       "to one place"));
  layout[9] = 17 * 4 * 128;
  layout[10] = 0;
  EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, layout); }), "o head stride 0 over 4"));
}

TEST(AttentionRun, ReferenceCoversEveryRow) {
  const Problem p = op().parse_problem("b=2,hq=4,hkv=4,nq=17,nk=5,d=96,causal=yes");
  const auto ref = op().reference_kernels(p, DType::f16);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_EQ(ref[0].file, "attention/reference.cuh");
  EXPECT_EQ(ref[0].name_expression,
            "ktune::flash_attention_reference<ktune::fp16, 96, true, false, false, false>");
  const RecordingLauncher l = run(op().default_params(p, DType::f16, device("sm_80")), p, 0,
                                  nullptr, true);
  ASSERT_EQ(l.launches.size(), 1u);
  const unsigned warps = l.launches[0].block[0] / 32;
  EXPECT_EQ(l.launches[0].block[0] % 32, 0u);
  EXPECT_GE(l.launches[0].grid[0] * warps, 17u);  // one warp per query row
  EXPECT_LT((l.launches[0].grid[0] - 1) * warps, 17u);
  EXPECT_EQ(l.launches[0].grid[1], 8u);
  EXPECT_EQ(l.launches[0].shared_bytes, 0u);
  EXPECT_EQ(l.args[0].o_row_stride, 96);
}

TEST(AttentionRun, VariantArgumentsReachTheKernelAndItsReference) {
  const Params params =
      op().parse_params("block_m=64,block_n=32,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0");
  const Problem off = op().parse_problem("b=1,hq=4,hkv=2,nq=100,nk=300,d=64,causal=yes");
  for (bool reference : {false, true}) {
    // Variants off: the cap and the slopes are not read (a null slopes pointer is fine).
    const FlashAttentionArgs a = run(params, off, 0, nullptr, reference, -1.0, 0).args[0];
    EXPECT_EQ(a.window, 0);
    EXPECT_EQ(a.softcap, 0.f);
    EXPECT_EQ(a.alibi_slopes, nullptr);

    const Problem all = op().parse_problem(
        "b=1,hq=4,hkv=2,nq=100,nk=300,d=64,causal=yes,window=77,softcap=yes,alibi=yes");
    const FlashAttentionArgs b = run(params, all, 0, nullptr, reference, 30.0).args[0];
    EXPECT_EQ(b.window, 77);
    EXPECT_FLOAT_EQ(b.softcap, 30.f);
    EXPECT_EQ(b.alibi_slopes, reinterpret_cast<const float*>(0x60000));
    // A cap must be given with softcap=yes, slopes with alibi=yes.
    EXPECT_TRUE(contains(run_error([&] { run(params, all, 0, nullptr, reference, 0.0); }),
                         "softcap 0.000000 must be a positive finite cap with softcap=yes"));
    EXPECT_TRUE(contains(
        run_error([&] {
          run(params, all, 0, nullptr, reference, std::numeric_limits<double>::infinity());
        }),
        "must be a positive finite cap"));
    EXPECT_TRUE(contains(run_error([&] { run(params, all, 0, nullptr, reference, 30.0, 0); }),
                         "alibi=yes needs the alibi_slopes tensor"));
  }
  // A problem of the first 7 dims only (flash_decode's) runs with the variants off.
  Problem seven = off;
  seven.values.resize(7);
  EXPECT_EQ(run(params, seven, 0, nullptr, true, -1.0, 0).args[0].window, 0);
  EXPECT_EQ(op().tensors(seven, DType::bf16).size(), 6u);
  EXPECT_EQ(op().reference_kernels(seven, DType::bf16)[0].name_expression,
            "ktune::flash_attention_reference<ktune::bf16, 64, true, false, false, false>");
}

TEST(AttentionRun, VariantsAreTemplateArguments) {
  const Params params =
      op().parse_params("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0");
  const auto expr = [&](const char* extra) {
    const Problem p =
        op().parse_problem(std::string("b=1,hq=2,hkv=1,nq=64,nk=64,d=128,causal=yes") + extra);
    return op().kernels(params, p, DType::bf16)[0].name_expression + " | " +
           op().reference_kernels(p, DType::bf16)[0].name_expression;
  };
  const std::string head = "ktune::flash_attention_fwd<ktune::bf16, 128, 128, 64, 4, 2, true, "
                           "false, 1, false, ";
  const std::string ref = "ktune::flash_attention_reference<ktune::bf16, 128, true, ";
  EXPECT_EQ(expr(""), head + "false, false, false> | " + ref + "false, false, false>");
  EXPECT_EQ(expr(",window=4096"), head + "true, false, false> | " + ref + "true, false, false>");
  EXPECT_EQ(expr(",softcap=yes"), head + "false, true, false> | " + ref + "false, true, false>");
  EXPECT_EQ(expr(",alibi=yes"), head + "false, false, true> | " + ref + "false, false, true>");
  EXPECT_EQ(expr(",window=1,softcap=yes,alibi=yes"),
            head + "true, true, true> | " + ref + "true, true, true>");
  // The variants change neither the space nor the defaults.
  const Problem plain = op().parse_problem(kMha);
  const Problem windowed = op().parse_problem(std::string(kMha) + ",window=4096,softcap=yes");
  const DeviceInfo h100 = device("sm_90a");
  EXPECT_EQ(Space(op(), plain, DType::bf16, h100).valid_count(),
            Space(op(), windowed, DType::bf16, h100).valid_count());
  EXPECT_EQ(op().default_params(plain, DType::bf16, h100),
            op().default_params(windowed, DType::bf16, h100));
}

TEST(AttentionRun, NameExpressionFollowsTheParameters) {
  const Problem p = op().parse_problem("b=1,hq=2,hkv=1,nq=64,nk=64,d=256,causal=yes");
  const Params params =
      op().parse_params("block_m=64,block_n=32,warps=4,stages=3,q_regs=1,smem_pad=1,impl=0");
  const auto ks = op().kernels(params, p, DType::f16);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].file, "attention/flash_attention.cuh");
  EXPECT_EQ(ks[0].name_expression,
            "ktune::flash_attention_fwd<ktune::fp16, 256, 64, 32, 4, 3, true, true, 1, true, false, "
            "false, false>");
}

TEST(AttentionRun, VarlenPacksTheSequencesAndPassesTheirOffsets) {
  const Problem p = op().parse_problem("b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=yes,varlen=yes");
  const Params params =
      op().parse_params("block_m=64,block_n=32,warps=4,stages=2,q_regs=1,smem_pad=0,impl=0");
  for (bool reference : {false, true}) {
    const RecordingLauncher l = run(params, p, 0, nullptr, reference);
    ASSERT_EQ(l.launches.size(), 1u);
    // The grid is sized by the longest sequence (nq) and the batch, as without varlen.
    EXPECT_EQ(l.launches[0].grid[1], 24u);
    if (!reference) {
      EXPECT_EQ(l.launches[0].grid[0], 4u);  // ceil(200 / 64)
    }
    const FlashAttentionArgs& a = l.args[0];
    EXPECT_EQ(a.cu_seqlens_q, reinterpret_cast<const int*>(0x70000));
    EXPECT_EQ(a.cu_seqlens_k, reinterpret_cast<const int*>(0x80000));
    EXPECT_EQ(a.seq_q, 200);
    EXPECT_EQ(a.seq_k, 300);
    EXPECT_EQ(a.batch, 3);
    // Without a layout: packed [total, h, d], no batch stride.
    EXPECT_EQ(a.q_batch_stride, 0);
    EXPECT_EQ(a.q_head_stride, 64);
    EXPECT_EQ(a.q_row_stride, 8 * 64);
    EXPECT_EQ(a.k_head_stride, 64);
    EXPECT_EQ(a.k_row_stride, 2 * 64);
    EXPECT_EQ(a.v_row_stride, 2 * 64);
    EXPECT_EQ(a.o_head_stride, 64);
    EXPECT_EQ(a.o_row_stride, 8 * 64);
    // Both offsets are required.
    EXPECT_TRUE(contains(run_error([&] { run(params, p, 0, nullptr, reference, 50.0, 0x60000, 0); }),
                         "flash_attention: varlen=yes needs cu_seqlens_q ([b + 1] int32 row "
                         "offsets)"));
    EXPECT_TRUE(contains(
        run_error([&] { run(params, p, 0, nullptr, reference, 50.0, 0x60000, 0x70000, 0); }),
        "varlen=yes needs cu_seqlens_k"));
  }
  // A layout's head and row strides apply to the packed arrays ([h, total, d] here); its batch
  // strides are passed on and ignored by the kernels.
  std::int64_t layout[12] = {8, 1000 * 64, 64, 8, 1000 * 64, 64,
                             8, 1000 * 64, 64, 8, 1000 * 64, 64};
  const FlashAttentionArgs a = run(params, p, 0, layout).args[0];
  EXPECT_EQ(a.q_head_stride, 1000 * 64);
  EXPECT_EQ(a.q_row_stride, 64);
  EXPECT_EQ(a.o_batch_stride, 8);
  // Off, the offsets are not read (null is fine).
  const Problem off = op().parse_problem("b=3,hq=8,hkv=2,nq=200,nk=300,d=64,causal=yes");
  EXPECT_EQ(run(params, off, 0, nullptr, false, 50.0, 0x60000, 0, 0).args[0].cu_seqlens_q,
            nullptr);
}

TEST(AttentionRun, VarlenIsTheLastTemplateArgumentAndOnlyWhenOn) {
  const Params params =
      op().parse_params("block_m=128,block_n=64,warps=4,stages=2,q_regs=0,smem_pad=0,impl=0");
  const auto expr = [&](const char* extra) {
    const Problem p =
        op().parse_problem(std::string("b=2,hq=2,hkv=1,nq=64,nk=64,d=128,causal=yes") + extra);
    return op().kernels(params, p, DType::bf16)[0].name_expression + " | " +
           op().reference_kernels(p, DType::bf16)[0].name_expression;
  };
  const std::string head = "ktune::flash_attention_fwd<ktune::bf16, 128, 128, 64, 4, 2, true, "
                           "false, 1, false, ";
  const std::string ref = "ktune::flash_attention_reference<ktune::bf16, 128, true, ";
  // Off: the names written before VARLEN existed (the shipped rows' kernels).
  EXPECT_EQ(expr(""), head + "false, false, false> | " + ref + "false, false, false>");
  EXPECT_EQ(expr(",varlen=yes"),
            head + "false, false, false, true> | " + ref + "false, false, false, true>");
  EXPECT_EQ(expr(",varlen=yes,window=100,alibi=yes"),
            head + "true, false, true, true> | " + ref + "true, false, true, true>");
  // Varlen changes neither the mma.sync space nor its defaults; of the wgmma kernel's points
  // the persistent ones are invalid with it (20 of 40 at d=128), as are the kv_apart=1 ones (20
  // more), and its Hopper default is the wgmma row's without the persistent grid.
  const Problem plain = op().parse_problem(kMha);
  const Problem packed = op().parse_problem(std::string(kMha) + ",varlen=yes");
  const DeviceInfo a100 = device("sm_80"), h100 = device("sm_90a");
  EXPECT_EQ(Space(op(), plain, DType::bf16, a100).valid_count(),
            Space(op(), packed, DType::bf16, a100).valid_count());
  EXPECT_EQ(op().default_params(plain, DType::f16, a100),
            op().default_params(packed, DType::f16, a100));
  EXPECT_EQ(Space(op(), plain, DType::bf16, h100).valid_count(),
            Space(op(), packed, DType::bf16, h100).valid_count() + 40);
  EXPECT_EQ(op().params_key(op().default_params(packed, DType::f16, h100)),
            "block_m=128,block_n=128,warps=12,stages=3,q_regs=0,smem_pad=0,impl=1,pingpong=1");
}

}  // namespace
}  // namespace ktune
