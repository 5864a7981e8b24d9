// Runtime::attention / ktune_attention on the host: which op serves a call, every bad argument
// named before any CUDA call, the packing in the serving op's order, and the C struct's
// versioning. No GPU needed (valid calls end in NoDevice here).
#include "runtime/dispatch/attention_args.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "templates/op.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected '" << (part) << "' in: " << (text)

template <typename T = void>
T* at(std::uint64_t a) {
  return reinterpret_cast<T*>(a);
}

/// A decode call: GQA 32/8, one query row, 4099 keys, d=128, fake 16-byte aligned addresses.
AttentionArgs decode_args() {
  AttentionArgs a;
  a.q = at(0x100000), a.k = at(0x200000), a.v = at(0x300000), a.o = at(0x400000);
  a.b = 3, a.hq = 32, a.hkv = 8, a.nq = 1, a.nk = 4099, a.d = 128;
  return a;
}

AttentionArgs prefill_args() {
  AttentionArgs a = decode_args();
  a.nq = a.nk = 777;
  a.causal = true;
  return a;
}

AttentionArgs paged_args() {
  AttentionArgs a = decode_args();
  a.page_size = 16;
  a.block_table = at<const std::int32_t>(0x500000);
  a.seq_lens = at<const std::int32_t>(0x510000);
  return a;
}

bool has_dim(const char* op, const char* dim) {
  for (const DimSpec& d : get_op(op).dims())
    if (d.name == dim) return true;
  return false;
}

RuntimeOptions options(const test::TempDir& dir) {
  RuntimeOptions o;
  o.db_path = (dir.path() / "user.db").string();
  o.use_shipped_databases = false;
  o.cache_dir = (dir.path() / "cache").string();
  return o;
}

TEST(AttentionArgs, AutomaticPicksDecodeForShortQueriesPagedOrNot) {
  EXPECT_STREQ(attention_op_for(decode_args()), "flash_decode");
  AttentionArgs a = decode_args();
  a.nq = kDecodeMaxNq;
  EXPECT_STREQ(attention_op_for(a), "flash_decode");
  a.nq = kDecodeMaxNq + 1;
  EXPECT_STREQ(attention_op_for(a), "flash_attention");
  EXPECT_STREQ(attention_op_for(prefill_args()), "flash_attention");
  // A paged cache goes by nq as a contiguous one does: both ops read pages.
  AttentionArgs paged = paged_args();
  EXPECT_STREQ(attention_op_for(paged), "flash_decode");
  paged.nq = kDecodeMaxNq + 1;  // chunked prefill against a paged cache
  EXPECT_STREQ(attention_op_for(paged), "flash_attention");
  // A paged variable-length batch (vLLM's prefill call), which decode refuses, goes to prefill
  // whatever its longest query.
  paged.nq = 1;
  paged.cu_seqlens_q = at<const std::int32_t>(0x800000);
  EXPECT_STREQ(attention_op_for(paged), "flash_attention");
  // A variant decode lacks goes to prefill when the cache is contiguous.
  for (const char* variant : {"window", "softcap", "alibi"}) {
    AttentionArgs v = decode_args();
    if (std::string(variant) == "window") v.window = 256;
    if (std::string(variant) == "softcap") v.softcap = 30.0f;
    if (std::string(variant) == "alibi") v.alibi_slopes = at<const float>(0x600000);
    EXPECT_STREQ(attention_op_for(v), has_dim("flash_decode", variant) ? "flash_decode"
                                                                         : "flash_attention")
        << variant;
  }
  // A variable-length batch goes by its longest query length as a fixed one does: decode up to
  // kDecodeMaxNq (one query row each here), with any variant; prefill above.
  AttentionArgs packed = decode_args();
  packed.cu_seqlens_q = at<const std::int32_t>(0x800000);
  packed.cu_seqlens_k = at<const std::int32_t>(0x810000);
  ASSERT_TRUE(has_dim("flash_decode", "varlen"));
  EXPECT_STREQ(attention_op_for(packed), "flash_decode");
  packed.nq = kDecodeMaxNq;
  packed.causal = true;
  packed.window = 128, packed.softcap = 30.0f, packed.alibi_slopes = at<const float>(0x600000);
  EXPECT_STREQ(attention_op_for(packed), "flash_decode");
  packed.nq = kDecodeMaxNq + 1;
  EXPECT_STREQ(attention_op_for(packed), "flash_attention");
  packed.impl = AttentionImpl::decode;  // forced: decode takes any nq up to its own bound
  EXPECT_STREQ(attention_op_for(packed), "flash_decode");
  packed.nq = 1;
  packed.impl = AttentionImpl::prefill;
  EXPECT_STREQ(attention_op_for(packed), "flash_attention");
  AttentionArgs forced = prefill_args();
  forced.impl = AttentionImpl::decode;
  EXPECT_STREQ(attention_op_for(forced), "flash_decode");
  forced = decode_args();
  forced.impl = AttentionImpl::prefill;
  EXPECT_STREQ(attention_op_for(forced), "flash_attention");
}

TEST(AttentionArgs, AutomaticSendsShortQueriesOfADtypeDecodeLacksToPrefill) {
  // e4m3 (prefill only): a short query goes to prefill, which serves it (a paged one too, whose
  // pages pack_attention refuses in e4m3); forced decode and a dtype neither op takes stay with
  // decode, whose dtype check says why (bad_args).
  AttentionArgs a = decode_args();
  a.dtype = DType::e4m3;
  EXPECT_STREQ(attention_op_for(a), "flash_attention");
  EXPECT_STREQ(pack_attention(a).op, "flash_attention");
  a.window = 64;
  EXPECT_STREQ(attention_op_for(a), "flash_attention");
  a.impl = AttentionImpl::decode;
  EXPECT_STREQ(attention_op_for(a), "flash_decode");
  AttentionArgs paged = paged_args();
  paged.dtype = DType::e4m3;
  EXPECT_STREQ(attention_op_for(paged), "flash_attention");
  AttentionArgs f32 = decode_args();
  f32.dtype = DType::f32;
  EXPECT_STREQ(attention_op_for(f32), "flash_decode");
  AttentionArgs bf16 = decode_args();
  bf16.window = 64;
  EXPECT_STREQ(attention_op_for(bf16),
               has_dim("flash_decode", "window") ? "flash_decode" : "flash_attention");
}

struct BadArgs {
  std::string what;
  std::function<void(AttentionArgs&)> change;
  std::vector<std::string> message;
};

std::vector<BadArgs> bad_args() {
  std::vector<BadArgs> cases = {
      {"q null", [](AttentionArgs& a) { a.q = nullptr; }, {"attention: q is null"}},
      {"o null (prefill)", [](AttentionArgs& a) { a.o = nullptr, a.nq = 100; },
       {"attention: o is null", "flash_attention"}},
      {"k misaligned", [](AttentionArgs& a) { a.k = at(0x200008); },
       {"attention: k at 0x200008 is not 16-byte aligned"}},
      {"lse misaligned", [](AttentionArgs& a) { a.lse = at<float>(0x700002); },
       {"attention: lse at 0x700002 is not 4-byte aligned"}},
      {"hq not a multiple of hkv", [](AttentionArgs& a) { a.hq = 30; }, {"hq", "hkv"}},
      {"d unsupported", [](AttentionArgs& a) { a.d = 100; }, {"d=100"}},
      {"b zero", [](AttentionArgs& a) { a.b = 0; }, {"b"}},
      {"window negative", [](AttentionArgs& a) { a.window = -1; },
       {"attention: window=-1 must be >= 0"}},
      {"softcap NaN", [](AttentionArgs& a) { a.softcap = std::nanf(""); },
       {"attention: softcap=nan must be finite and >= 0"}},
      {"softcap negative", [](AttentionArgs& a) { a.softcap = -5.0f; },
       {"attention: softcap=-5 must be finite and >= 0"}},
      {"scale infinite", [](AttentionArgs& a) { a.scale = std::numeric_limits<float>::infinity(); },
       {"attention: scale=inf must be finite"}},
      {"dtype f32", [](AttentionArgs& a) { a.dtype = DType::f32; },
       {"attention: dtype fp32 (0) is not supported by flash_", "(allowed: bf16, fp16"}},
      {"e4m3 forced to decode",
       [](AttentionArgs& a) { a.dtype = DType::e4m3, a.impl = AttentionImpl::decode; },
       {"attention: dtype e4m3 (4) is not supported by flash_decode (allowed: bf16, fp16)"}},
      {"e4m3 paged", [](AttentionArgs& a) { a = paged_args(), a.dtype = DType::e4m3; },
       {"attention: dtype e4m3 with page_size=16: paged K/V take bf16 or fp16"}},
      {"q_scale with bf16", [](AttentionArgs& a) { a.q_scale = 0.5f; },
       {"attention: q_scale=0.5 dequantises e4m3 inputs; with dtype bf16 it must be 1"}},
      {"v_scale zero with e4m3",
       [](AttentionArgs& a) {
         a.dtype = DType::e4m3;
         a.nq = 777;  // prefill: decode takes no e4m3
         a.v_scale = 0.0f;
       },
       {"attention: v_scale=0 must be a positive finite scale"}},
      {"impl out of range", [](AttentionArgs& a) { a.impl = static_cast<AttentionImpl>(7); },
       {"attention: impl 7 is not one of automatic (0), prefill (1), decode (2)"}},
      {"block_table without a page size",
       [](AttentionArgs& a) { a.block_table = at<const std::int32_t>(0x500000); },
       {"attention: block_table is set but page_size=0"}},
      {"seq_lens without a page size",
       [](AttentionArgs& a) { a.seq_lens = at<const std::int32_t>(0x510000); },
       {"attention: seq_lens is set but page_size=0"}},
      {"paged without a block table",
       [](AttentionArgs& a) { a = paged_args(), a.block_table = nullptr; },
       {"attention: block_table is null (flash_decode needs it for a paged cache)"}},
      {"paged without lengths", [](AttentionArgs& a) { a = paged_args(), a.seq_lens = nullptr; },
       {"attention: seq_lens is null"}},
      {"page size not allowed", [](AttentionArgs& a) { a = paged_args(), a.page_size = 24; },
       {"page=24"}},
      {"cu_seqlens_q alone",
       [](AttentionArgs& a) { a.cu_seqlens_q = at<const std::int32_t>(0x800000); },
       {"attention: cu_seqlens_q is set but cu_seqlens_k is null"}},
      {"paged and varlen",
       [](AttentionArgs& a) {
         a = paged_args();
         a.cu_seqlens_q = at<const std::int32_t>(0x800000);
         a.cu_seqlens_k = at<const std::int32_t>(0x810000);
       },
       // Automatic routing sends it to prefill, which takes the pair with cu_seqlens_q alone.
       {"attention: cu_seqlens_k is set with page_size=16: a paged cache's key counts are "
        "seq_lens"}},
      {"paged and varlen forced to decode",
       [](AttentionArgs& a) {
         a = paged_args();
         a.impl = AttentionImpl::decode;
         a.cu_seqlens_q = at<const std::int32_t>(0x800000);
         a.cu_seqlens_k = at<const std::int32_t>(0x810000);
       },
       {"for flash_decode: varlen=yes with page=16"}},
      {"varlen decode without cu_seqlens_q",
       [](AttentionArgs& a) { a.cu_seqlens_k = at<const std::int32_t>(0x810000); },
       {"attention: cu_seqlens_k is set but cu_seqlens_q is null"}},
      {"workspace size without pointer", [](AttentionArgs& a) { a.workspace_bytes = 4096; },
       {"workspace is null but workspace_bytes is 4096"}},
      // Zero strides broadcast an input; an output's would write every head (or sequence) to
      // one place.
      {"o head stride zero",
       [](AttentionArgs& a) {
         static AttentionLayout l;
         l = AttentionLayout::bhsd(a.hq, a.hkv, a.nq, a.nk, a.d);
         l.o.head = 0;
         a.layout = &l;
       },
       {"attention: o head stride 0 over 32 heads would write them all to one place"}},
      {"o batch stride zero",
       [](AttentionArgs& a) {
         static AttentionLayout l;
         l = AttentionLayout::bshd(a.hq, a.hkv, a.nq, a.nk, a.d);
         l.o.batch = 0;
         a.layout = &l;
       },
       {"attention: o batch stride 0 over 3 sequences"}},
  };
  return cases;
}

TEST(AttentionArgs, EveryBadArgumentIsNamedBeforeAnyCudaCall) {
  test::TempDir dir;
  Runtime rt(options(dir));
  for (const BadArgs& c : bad_args()) {
    AttentionArgs a = decode_args();
    c.change(a);
    try {
      rt.attention(a, nullptr);
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const InvalidArgument& e) {
      for (const std::string& part : c.message) EXPECT_CONTAINS(e.what(), part) << c.what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.what << ": not an InvalidArgument: " << e.what();
    }
  }
}

TEST(AttentionArgs, ValidArgumentsReachTheDevice) {
  if (test::gpu_missing_reason().empty())
    GTEST_SKIP() << "a GPU is here: fake addresses would be launched";
  test::TempDir dir;
  Runtime rt(options(dir));
  AttentionArgs with_lse = decode_args();
  with_lse.lse = at<float>(0x700000);
  AttentionArgs caller = paged_args();
  caller.workspace = at(0xa00000), caller.workspace_bytes = 1;  // its size is checked once planned
  AttentionArgs alibi = prefill_args();
  alibi.alibi_slopes = at<const float>(0x600000);
  alibi.window = 100, alibi.softcap = 50.0f;
  const AttentionLayout bshd = AttentionLayout::bshd(32, 8, 1, 4099, 128);
  AttentionArgs strided = decode_args();
  strided.layout = &bshd;
  AttentionArgs packed = prefill_args();
  packed.cu_seqlens_q = at<const std::int32_t>(0x800000);
  packed.cu_seqlens_k = at<const std::int32_t>(0x810000);
  AttentionArgs packed_decode = decode_args();
  packed_decode.cu_seqlens_q = at<const std::int32_t>(0x800000);
  packed_decode.cu_seqlens_k = at<const std::int32_t>(0x810000);
  AttentionArgs fp8 = decode_args();  // one query row: prefill, decode takes no e4m3
  fp8.dtype = DType::e4m3;
  fp8.q_scale = 0.25f, fp8.k_scale = 0.25f, fp8.v_scale = 0.5f;
  for (const AttentionArgs& a : {decode_args(), prefill_args(), paged_args(), with_lse, caller,
                                 alibi, strided, packed, packed_decode, fp8}) {
    EXPECT_THROW(rt.attention(a, nullptr), NoDevice);
    EXPECT_THROW(rt.attention_workspace_size(a), NoDevice);
  }
  // The prefill-only entry (and ktune_flash_attention over it) packs through the same code: a
  // valid call gets as far as the device, with and without strides and the lse output.
  const void* q = at<const void>(0x100000);
  EXPECT_THROW(rt.flash_attention(q, q, q, at(0x200000), nullptr, 2, 8, 2, 333, 1000, 128, true,
                                  0.f, DType::bf16, nullptr),
               NoDevice);
  EXPECT_THROW(rt.flash_attention(q, q, q, at(0x200000), at<float>(0x700000), 32, 8, 1, 4099, 4099,
                                  128, false, 0.f, DType::f16, nullptr, &bshd),
               NoDevice);
}

TEST(AttentionArgs, PrefillEntryNamesBadArguments) {
  test::TempDir dir;
  Runtime rt(options(dir));
  const void* q = at<const void>(0x100000);
  void* o = at(0x200000);
  const auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an InvalidArgument: ") + e.what();
    }
    return "accepted";
  };
  EXPECT_CONTAINS(message([&] {
                    rt.flash_attention(q, q, q, o, nullptr, 1, 8, 3, 64, 64, 64, false, 0.f,
                                       DType::bf16, nullptr);
                  }),
                  "hq=8 is not a multiple of hkv=3");
  EXPECT_CONTAINS(message([&] {
                    rt.flash_attention(q, q, q, o, nullptr, 1, 8, 8, 64, 64, 84, false, 0.f,
                                       DType::bf16, nullptr);
                  }),
                  "d=84 is not a multiple of 8");
  EXPECT_CONTAINS(message([&] {
                    rt.flash_attention(nullptr, q, q, o, nullptr, 1, 8, 8, 64, 64, 64, false, 0.f,
                                       DType::bf16, nullptr);
                  }),
                  "q is null");
  EXPECT_CONTAINS(message([&] {
                    rt.flash_attention(q, q, q, at(0x200008), nullptr, 1, 8, 8, 64, 64, 64, false,
                                       0.f, DType::bf16, nullptr);
                  }),
                  "is not 16-byte aligned");
}

TEST(AttentionArgs, PackedInTheServingOpsOrder) {
  AttentionArgs a = paged_args();
  a.lse = at<float>(0x700000);
  a.scale = 0.25f;
  const AttentionCall c = pack_attention(a);
  const Op& op = get_op("flash_decode");
  ASSERT_STREQ(c.op, "flash_decode");
  ASSERT_EQ(c.ndims, static_cast<int>(op.dims().size()));
  for (std::size_t i = 0; i < op.dims().size(); ++i) {
    const std::string& name = op.dims()[i].name;
    const std::int64_t want = name == "b"      ? 3
                              : name == "hq"   ? 32
                              : name == "hkv"  ? 8
                              : name == "nq"   ? 1
                              : name == "nk"   ? 4099
                              : name == "d"    ? 128
                              : name == "page" ? 16
                                               : 0;
    EXPECT_EQ(c.dims[i], want) << name;
  }
  Problem p;
  p.values.assign(c.dims.begin(), c.dims.begin() + c.ndims);
  const std::vector<TensorSpec> specs = op.tensors(p, DType::bf16);
  ASSERT_EQ(c.ntensors, static_cast<int>(specs.size()));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    const std::uint64_t want = name == "q"                ? 0x100000
                               : name == "k_cache"        ? 0x200000
                               : name == "v_cache"        ? 0x300000
                               : name == "o"              ? 0x400000
                               : name == "lse"            ? 0x700000
                               : name == "block_table"    ? 0x500000
                               : name == "seq_lens"       ? 0x510000
                                                          : 0;
    EXPECT_EQ(c.tensors[i], want) << name;
  }
  ASSERT_GE(c.nscalars, 1);
  EXPECT_EQ(c.scalars[0], 0.25);  // "scale" comes first in both ops
  EXPECT_FALSE(c.has_strides);
  EXPECT_FALSE(c.workspace.given());

  // Prefill with every variant: its dims carry them, the slopes and the cap go in place.
  AttentionArgs v = prefill_args();
  v.window = 300, v.softcap = 30.0f, v.alibi_slopes = at<const float>(0x600000);
  const AttentionLayout l = AttentionLayout::bshd(32, 8, 777, 777, 128);
  v.layout = &l;
  const AttentionCall pv = pack_attention(v);
  ASSERT_STREQ(pv.op, "flash_attention");
  const Op& pre = get_op("flash_attention");
  for (std::size_t i = 0; i < pre.dims().size(); ++i) {
    const std::string& name = pre.dims()[i].name;
    if (name == "window") {
      EXPECT_EQ(pv.dims[i], 300);
    } else if (name == "softcap" || name == "alibi" || name == "causal") {
      EXPECT_EQ(pv.dims[i], 1) << name;
    }
  }
  for (std::size_t i = 0; i < pre.scalars().size(); ++i)
    if (pre.scalars()[i].name == "softcap") {
      EXPECT_EQ(pv.scalars[i], 30.0);
    }
  EXPECT_TRUE(pv.has_strides);
  // Varlen: the offsets go last, after the slopes.
  AttentionArgs vl = prefill_args();
  vl.cu_seqlens_q = at<const std::int32_t>(0x800000);
  vl.cu_seqlens_k = at<const std::int32_t>(0x810000);
  const AttentionCall pl = pack_attention(vl);
  ASSERT_STREQ(pl.op, "flash_attention");
  ASSERT_GE(pl.ntensors, 2);
  EXPECT_EQ(pl.tensors[static_cast<std::size_t>(pl.ntensors - 2)], 0x800000u);
  EXPECT_EQ(pl.tensors[static_cast<std::size_t>(pl.ntensors - 1)], 0x810000u);
  EXPECT_EQ(pv.strides[2], l.q.seq);
  EXPECT_EQ(pv.strides[11], l.o.seq);

  // Varlen decode (nq <= kDecodeMaxNq): flash_decode with varlen=yes, the offsets at its
  // cu_seqlens_q / cu_seqlens_k, the slopes before them; a packed layout's strides pass as given.
  AttentionArgs vd = decode_args();
  vd.nq = 5, vd.causal = true, vd.lse = at<float>(0x700000);
  vd.alibi_slopes = at<const float>(0x600000);
  vd.cu_seqlens_q = at<const std::int32_t>(0x800000);
  vd.cu_seqlens_k = at<const std::int32_t>(0x810000);
  const AttentionLayout packed = AttentionLayout::bshd(32, 8, 5, 4099, 128);
  vd.layout = &packed;
  const AttentionCall dl = pack_attention(vd);
  ASSERT_STREQ(dl.op, "flash_decode");
  ASSERT_EQ(dl.ndims, static_cast<int>(op.dims().size()));
  for (std::size_t i = 0; i < op.dims().size(); ++i) {
    const std::string& name = op.dims()[i].name;
    const std::int64_t want = name == "b"        ? 3
                              : name == "hq"     ? 32
                              : name == "hkv"    ? 8
                              : name == "nq"     ? 5
                              : name == "nk"     ? 4099
                              : name == "d"      ? 128
                              : name == "causal" ? 1
                              : name == "alibi"  ? 1
                              : name == "varlen" ? 1
                                                 : 0;
    EXPECT_EQ(dl.dims[i], want) << name;
  }
  Problem dp;
  dp.values.assign(dl.dims.begin(), dl.dims.begin() + dl.ndims);
  const std::vector<TensorSpec> dspecs = op.tensors(dp, DType::bf16);
  ASSERT_EQ(dl.ntensors, static_cast<int>(dspecs.size()));
  int offsets = 0;
  for (std::size_t i = 0; i < dspecs.size(); ++i) {
    const std::string& name = dspecs[i].name;
    const std::uint64_t want = name == "q"              ? 0x100000
                               : name == "k"            ? 0x200000
                               : name == "v"            ? 0x300000
                               : name == "o"            ? 0x400000
                               : name == "lse"          ? 0x700000
                               : name == "alibi_slopes" ? 0x600000
                               : name == "cu_seqlens_q" ? 0x800000
                               : name == "cu_seqlens_k" ? 0x810000
                                                        : 0;
    EXPECT_EQ(dl.tensors[i], want) << name;
    offsets += name.rfind("cu_seqlens_", 0) == 0;
  }
  EXPECT_EQ(offsets, 2);
  EXPECT_TRUE(dl.has_strides);
  EXPECT_EQ(dl.strides[1], packed.q.head);
  EXPECT_EQ(dl.strides[2], packed.q.seq);
  EXPECT_EQ(dl.strides[5], packed.k.seq);
  // Without ALiBi the slot of the slopes stays, empty.
  vd.alibi_slopes = nullptr;
  const AttentionCall dn = pack_attention(vd);
  ASSERT_STREQ(dn.op, "flash_decode");
  ASSERT_EQ(dn.ntensors, dl.ntensors);
  EXPECT_EQ(dn.tensors[5], 0u);
  EXPECT_EQ(dn.tensors[6], 0x800000u);
  EXPECT_EQ(dn.tensors[7], 0x810000u);
  // A 4-byte aligned offsets pointer (a torch int32 slice) is accepted; a 2-byte one is not.
  vd.cu_seqlens_k = at<const std::int32_t>(0x810004);
  EXPECT_EQ(pack_attention(vd).tensors[7], 0x810004u);
  vd.cu_seqlens_k = at<const std::int32_t>(0x810002);
  EXPECT_THROW(pack_attention(vd), InvalidArgument);
}

TEST(AttentionArgs, CStructIsVersionedAndChecked) {
  ktune_attention_args a;
  ASSERT_EQ(ktune_attention_args_init(&a), KTUNE_OK);
  EXPECT_EQ(a.struct_size, sizeof a);
  EXPECT_EQ(a.dtype, KTUNE_BF16);
  EXPECT_EQ(a.impl, KTUNE_ATTENTION_AUTO);
  EXPECT_EQ(a.q, nullptr);
  EXPECT_EQ(ktune_attention_args_init(nullptr), KTUNE_ERROR_INVALID_ARGUMENT);

  a.q = at(0x100000), a.k = at(0x200000), a.v = at(0x300000), a.o = at(0x400000);
  a.b = 1, a.hq = 8, a.hkv = 8, a.nq = 1, a.nk = 100, a.d = 64;
  ktune_attention_args bad = a;
  bad.struct_size = 8;
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_attention: args->struct_size is 8");
  bad = a;
  bad.causal = 2;
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "causal=2 must be 0 or 1");
  // The prefill entry too (it took any nonzero value as causal).
  EXPECT_EQ(ktune_flash_attention(a.q, a.k, a.v, a.o, nullptr, 1, 8, 8, 100, 100, 64, nullptr, 7,
                                  0.f, KTUNE_BF16, nullptr),
            KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_flash_attention: causal=7 must be 0 or 1");
  bad = a;
  bad.cu_seqlens_k = at<const std::int32_t>(0x810000);  // reaches the packer: both or neither
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "cu_seqlens_k is set but cu_seqlens_q is null");
  bad = a;
  bad.page_size = 16;
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "attention: block_table is null");
  EXPECT_EQ(ktune_attention(nullptr, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  size_t bytes = 0;
  EXPECT_EQ(ktune_attention_workspace_size(&a, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "bytes is null");
  if (test::gpu_missing_reason().empty()) return;
  EXPECT_EQ(ktune_attention(&a, nullptr), KTUNE_ERROR_NO_DEVICE);
  EXPECT_EQ(ktune_attention_workspace_size(&a, &bytes), KTUNE_ERROR_NO_DEVICE);
  // Strides reach the packer: a bad one fails the op's check on the device only, so here the
  // call still ends at the missing device.
  const int64_t strides[12] = {8 * 64, 64, 8 * 64, 8 * 100 * 64, 64, 8 * 64,
                               8 * 100 * 64, 64, 8 * 64, 8 * 64, 64, 8 * 64};
  a.strides = strides;
  EXPECT_EQ(ktune_attention(&a, nullptr), KTUNE_ERROR_NO_DEVICE);
}

// A caller whose struct is the first version's (an older header, a ctypes binding without the
// fields appended since, as decode_bench.py's once was) passes its sizeof to the _sized init:
// the plain init writes this header's sizeof and would overwrite the caller's memory past it.
TEST(AttentionArgs, InitSizedWritesOnlyTheCallersBytes) {
  constexpr std::size_t first = offsetof(ktune_attention_args, workspace_bytes) + sizeof(size_t);
  constexpr std::size_t full = sizeof(ktune_attention_args);
  static_assert(first < full, "cu_seqlens_q/k came after the first version");
  // The caller's struct, then guard bytes that no init may touch.
  alignas(ktune_attention_args) unsigned char buf[full + 64];
  std::memset(buf, 0xAB, sizeof buf);
  auto* raw = reinterpret_cast<ktune_attention_args*>(buf);
  const auto guard_intact = [&](std::size_t from) {
    for (std::size_t i = from; i < sizeof buf; ++i)
      if (buf[i] != 0xAB) return false;
    return true;
  };
  ASSERT_EQ(ktune_attention_args_init_sized(raw, first), KTUNE_OK) << ktune_last_error();
  EXPECT_TRUE(guard_intact(first));
  ktune_attention_args plain;
  ASSERT_EQ(ktune_attention_args_init(&plain), KTUNE_OK);
  // The bytes it wrote are the plain init's, struct_size apart.
  EXPECT_EQ(std::memcmp(buf + sizeof(size_t), reinterpret_cast<unsigned char*>(&plain) +
                        sizeof(size_t), first - sizeof(size_t)),
            0);
  // The caller's view: its bytes, then memory of its own that the library must never read
  // (here a cu_seqlens_k without cu_seqlens_q, which the checks would refuse).
  ktune_attention_args a;
  std::memset(static_cast<void*>(&a), 0xCD, sizeof a);
  std::memcpy(static_cast<void*>(&a), buf, first);
  a.cu_seqlens_q = nullptr;
  EXPECT_EQ(a.struct_size, first);
  EXPECT_EQ(a.dtype, KTUNE_BF16);
  EXPECT_EQ(a.impl, KTUNE_ATTENTION_AUTO);
  EXPECT_EQ(a.q, nullptr);
  EXPECT_EQ(a.workspace_bytes, 0u);

  // Sizes outside first..full are refused, and nothing is written.
  for (const std::size_t size : {std::size_t{0}, first - 1, full + 1, full + 64}) {
    std::memset(buf, 0xAB, sizeof buf);
    EXPECT_EQ(ktune_attention_args_init_sized(raw, size), KTUNE_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_CONTAINS(ktune_last_error(), "ktune_attention_args_init_sized: size is " +
                                            std::to_string(size) + ", not in " +
                                            std::to_string(first) + ".." +
                                            std::to_string(full));
    EXPECT_TRUE(guard_intact(0)) << size;
  }
  EXPECT_EQ(ktune_attention_args_init_sized(nullptr, first), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_attention_args_init_sized: args is null");
  // The full size is the plain init, byte for byte.
  std::memset(buf, 0x5A, sizeof buf);
  ASSERT_EQ(ktune_attention_args_init_sized(raw, full), KTUNE_OK);
  EXPECT_EQ(std::memcmp(buf, &plain, full), 0);
  EXPECT_EQ(buf[full], 0x5A);

  // The first-size struct goes through the checks as before.
  a.q = at(0x100000), a.k = at(0x200000), a.v = at(0x300000), a.o = at(0x400000);
  a.b = 1, a.hq = 8, a.hkv = 8, a.nq = 1, a.nk = 100, a.d = 64;
  ktune_attention_args bad = a;
  bad.causal = 2;
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "causal=2 must be 0 or 1");
  bad = a;
  bad.page_size = 16;
  EXPECT_EQ(ktune_attention(&bad, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "attention: block_table is null");
  if (test::gpu_missing_reason().empty()) return;
  EXPECT_EQ(ktune_attention(&a, nullptr), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
  size_t bytes = 0;
  EXPECT_EQ(ktune_attention_workspace_size(&a, &bytes), KTUNE_ERROR_NO_DEVICE)
      << ktune_last_error();
}

}  // namespace
}  // namespace ktune

namespace ktune {
namespace {

// The side tensors (lse, slopes, block table, lengths, offsets) are read or written as 4-byte
// words: the planner asks them for 4-byte alignment, the data tensors for the op's 16, as the
// packer does (a torch int32 slice need not be 16-byte aligned).
TEST(AttentionArgs, SideTensorsNeedWordAlignmentOnly) {
  for (const char* op : {"flash_attention", "flash_decode"})
    for (const char* extra : {",page=16", ",varlen=yes"}) {
      if (std::string(op) == "flash_attention" && std::string(extra) == ",page=16") continue;
      const Problem p = get_op(op).parse_problem(
          std::string("b=2,hq=8,hkv=2,nq=3,nk=100,d=64,alibi=yes") + extra);
      for (const TensorSpec& s : get_op(op).tensors(p, DType::bf16))
        EXPECT_EQ(s.alignment, s.dtype == DType::bf16 ? 0u : 4u) << op << extra << " " << s.name;
    }
}

}  // namespace
}  // namespace ktune
