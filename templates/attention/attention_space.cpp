// Why a point of flash attention's space cannot be instantiated, without a device: the dtypes
// and head dims each kernel takes, the tunables each kernel ignores, the tiles that would spill
// or not fit 227 KiB of shared memory, and the kernels' own static checks; one reason per point.
#include <optional>
#include <string>

#include "templates/attention/attention_parts.hpp"

namespace ktune::attention {

std::string smem_text(const Config& c, const Shape& s, DType t) {
  const std::int64_t d = s.d;
  return "block_m=" + str(c.block_m) + ", block_n=" + str(c.block_n) + ", stages=" +
         str(c.stages) + (c.smem_pad ? ", smem_pad=1" : "") + " at d=" + str(d) +
         (t == DType::e4m3 ? " (e4m3)" : "") + " need " + str(smem_bytes(c, d, t, s.page)) +
         " bytes of shared memory (Q tile + " + str(c.stages) + " K and V tiles)";
}

namespace {

/// config_reason for impl=1, the wgmma kernel.
std::optional<std::string> sm90_reason(const Config& c, const Shape& s, const Op& op,
                                       const Params& params, DType t) {
  if (s.paged() && t == DType::e4m3)
    return std::string("page > 0 takes bf16 or fp16 (e4m3's V transpose is per batch)");
  if (s.varlen && t == DType::e4m3)
    return std::string("varlen=yes takes bf16 or fp16 (e4m3's V transpose is per batch)");
  // The paged producer walks every item: persistent, it spilled 12-76 bytes with 32 registers
  // (3 consumers) and 16-36 with 40 (2 consumers at d=256, whose consumers keep 232; NVRTC,
  // CUDA 13.0).
  if (s.paged() && c.persistent && (consumers(c) == 3 || (s.d == 256 && consumers(c) == 2)))
    return "impl=1 persistent with a paged cache and " + str(consumers(c)) +
           " consumer warpgroups at d=" + str(s.d) + " spills (the producer's " +
           (consumers(c) == 3 ? "32" : "40") + " registers); " +
           (consumers(c) == 3 ? "block_m=64 or 128" : "block_m=64") + ", or persistent=0";
  // NVRTC, CUDA 13.0: 8 bytes of spills at d=96 (three consumers' 160 registers, paged).
  if (s.paged() && s.d == 96 && consumers(c) == 3)
    return std::string("impl=1 with a paged cache and 3 consumer warpgroups at d=96 spills "
                       "(their 160 registers): block_m=64 or 128");
  if (s.varlen && c.persistent)
    return std::string("impl=1 with varlen=yes runs one CTA per query tile (persistent=0): "
                       "its tiles past a sequence's end leave at once");
  if (s.d != 64 && s.d != 96 && s.d != 128 && s.d != 256)
    return "impl=1 takes d = 64, 96, 128 or 256; d=" + str(s.d) + " runs with impl=0";
  // With 2 stages the next K tile goes into the slot P V still reads; with 3 or more it
  // loads a whole tile ahead anyway.
  if (c.kv_apart && c.stages != 2)
    return "kv_apart=1 is for stages=2 (stages=" + str(c.stages) +
           " already loads each K tile a whole tile ahead)";
  // NVRTC, CUDA 13.0: 8-12 bytes of spills at the consumers' 240 registers.
  if (c.kv_apart && c.persistent && s.d == 256 && consumers(c) == 2)
    return std::string("kv_apart=1 with persistent=1 at d=256 and two consumers spills (their "
                       "240 registers): persistent=0");
  // The same with a window or ALiBi slopes: 4-24 bytes (attention_compile_test, 2026-12-03).
  if (c.kv_apart && s.d == 256 && consumers(c) == 2 && (s.window > 0 || s.alibi))
    return std::string("kv_apart=1 at d=256 with two consumers and a window or ALiBi spills "
                       "(their 240 registers): block_m=64 or kv_apart=0");
  if (c.kv_apart && s.varlen_or_paged())
    return std::string("kv_apart=1 is for contiguous K/V without varlen (the TMA producer; "
                       "varlen and paged tiles are copied by the producer's threads)");
  // 80-key tiles are FlashAttention-3's at d=256, where two stages of 128 keys do not fit
  // beside two consumers' Q; elsewhere 64 and 128 cover the space.
  if (c.block_n == 80 && (s.d != 256 || t == DType::e4m3))
    return "block_n=80 is searched at d=256 with bf16 or fp16 only (d=" + str(s.d) +
           (t == DType::e4m3 ? ", e4m3" : "") + "): block_n=64 or 128";
  if (s.paged() && c.block_n % s.page != 0 && s.page % c.block_n != 0) {
    // Every power-of-two tile meets it; 80-key tiles only with 16-key pages.
    std::string pages;
    for (std::int64_t page : kPages)
      if (page > 0 && (c.block_n % page == 0 || page % c.block_n == 0))
        pages += (pages.empty() ? "" : " or ") + str(page);
    return "block_n=" + str(c.block_n) + " with a paged cache takes page=" + pages +
           " (a key tile covers whole pages or lies in one), not page=" + str(s.page);
  }
  if (c.block_m % kSm90RowsPerConsumer != 0 || c.block_m > 3 * kSm90RowsPerConsumer)
    return "impl=1 takes block_m = 64, 128 or 192 (64 query rows per consumer warpgroup), "
           "not " + str(c.block_m);
  if (c.warps != 4 * (consumers(c) + 1))
    return "impl=1 with block_m=" + str(c.block_m) + " runs " + str(consumers(c)) +
           " consumer warpgroups and a producer: warps=" + str(4 * (consumers(c) + 1)) +
           ", not " + str(c.warps);
  // Three consumers get 160 registers each; what spills there (attention_compile_test: 280-352
  // bytes for d=128 with 128-key tiles, 176-192 for d=64 with 128-key tiles and a window or
  // ALiBi) is refused rather than measured.
  if (consumers(c) == 3 && c.block_n == 128 && (s.d == 96 || s.d == 128 || s.window > 0 ||
                                                s.alibi))
    return "impl=1 with 3 consumer warpgroups and block_n=128 at d=" + str(s.d) +
           (s.d == 96 || s.d == 128 ? "" : " with a window or ALiBi") +
           " spills (160 registers per thread); block_n=64 or block_m=128 fit";
  if (c.pingpong && consumers(c) == 1)
    return std::string("pingpong=1 needs 2 or 3 consumer warpgroups (block_m=128 or 192)");
  if (!c.reg_split) {
    if (consumers(c) == 1)
      return std::string("reg_split=0 with one consumer warpgroup: its launch bound already "
                         "gives every warpgroup 255 registers (no reallocation either way); "
                         "only reg_split=1 is searched");
    // Without reallocation a consumer thread has 168 (2 consumers) or 128 (3) registers:
    // ptxas (CUDA 13.0, every variant on) spills beyond these, and serialises wgmmas.
    const bool fits = t != DType::e4m3 && c.block_n == 64 &&
                      (s.d == 64 || ((s.d == 96 || s.d == 128) && consumers(c) == 2));
    if (!fits)
      return "reg_split=0 leaves each consumer thread " +
             str(consumers(c) == 2 ? 168 : 128) + " registers, which spill at d=" + str(s.d) +
             ", block_n=" + str(c.block_n) + ", " + str(consumers(c)) + " consumers" +
             (t == DType::e4m3 ? " (e4m3)" : "") +
             ": it fits 16-bit tiles of block_n=64 at d=64 (2 or 3 consumers) or d=96 and "
             "128 (2)";
  }
  if (c.q_regs || c.smem_pad)
    return std::string("impl=1 keeps Q in shared memory in the 128-byte swizzle: q_regs=0 and "
                       "smem_pad=0");
  if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
    return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
  if (const char* why = flash_attention_sm90_invalid_reason(static_cast<int>(s.d), c.block_n,
                                                            consumers(c), c.stages,
                                                            elem_bytes(t)))
    return op.params_key(params) + ": " + why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> config_reason(const Config& c, const Shape& s, std::int64_t dv,
                                         DType t, const Op& op, const Params& params) {
  if (t == DType::e4m3 && c.impl != 1)
    return std::string("e4m3 runs on the wgmma kernel only (impl=1, sm_90a)");
  if (dv != s.d) {
    if (t == DType::e4m3) return std::string("e4m3 takes d = 128 or 256");
    if (c.impl == 1 && s.d == 32)
      return "impl=1 takes d = 64, 96, 128 or 256; d=" + str(dv) + " runs with impl=0";
  }
  if (t != DType::e4m3 && c.stages == 4)
    return std::string("stages=4 is for e4m3 tiles (half the bytes); 16-bit tiles take 2 or "
                       "3");
  if (c.impl == 1) return sm90_reason(c, s, op, params, t);
  if (c.block_n == 80)
    return std::string("block_n=80 is for impl=1 (d=256); impl=0 takes 32, 64 or 128");
  if (c.pingpong)
    return std::string("pingpong=1 is for impl=1 (turns between its consumer warpgroups)");
  if (c.persistent)
    return std::string("persistent=1 is for impl=1 (impl=0 runs one CTA per query tile)");
  if (!c.reg_split)
    return std::string("reg_split=0 is for impl=1 (impl=0 has no producer warpgroup): only "
                       "reg_split=1 is searched");
  if (c.kv_apart)
    return std::string("kv_apart=1 is for impl=1 (its TMA ring's slot barriers)");
  if (c.warps > 8)
    return "warps=" + str(c.warps) + " is for impl=1 (4 per warpgroup); impl=0 takes 4 or 8";
  if (c.block_m % (16 * c.warps) != 0)
    return "block_m=" + str(c.block_m) + " is not a multiple of 16 * warps=" + str(c.warps) +
           " (each warp owns whole 16-row fragments)";
  if (c.block_m / c.warps > 32)
    return "block_m=" + str(c.block_m) + " / warps=" + str(c.warps) + " = " +
           str(c.block_m / c.warps) + " query rows per warp (at most 32: two 16-row fragments)";
  if (smem_bytes(c, s.d, t, s.page) > 227u * 1024u)
    return smem_text(c, s, t) + ", more than the 227 KiB any GPU gives a block";
  // Anything else the kernel's static_asserts would reject (nothing, with the lists above).
  if (const char* why = flash_attention_invalid_reason(static_cast<int>(s.d), c.block_m,
                                                       c.block_n, c.warps, c.stages, 1,
                                                       c.smem_pad))
    return op.params_key(params) + ": " + why;
  return std::nullopt;
}

}  // namespace ktune::attention
