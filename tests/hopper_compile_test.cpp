// Hopper warpgroup MMA without a GPU: the descriptor, swizzle and accumulator-layout functions of
// common/wgmma.cuh on the host; NVRTC compiles for sm_90a of the wgmma tile test kernel (every N,
// both dtypes) and of a sample of moe_gemm_sm90_kernel, with their registers and spills (none
// allowed); that both still compile for sm_80 (to a trap); that the static_asserts reject what
// moe_gemm_sm90_invalid_reason rejects; and, where nvdisasm is found ($KTUNE_NVDISASM, the
// toolkit, PATH), that the SASS holds HGMMA and that the GEMM's wgmmas are batched (ptxas
// serialises them, one wait after each, when it cannot prove the accumulators untouched). The
// TMA and warp-specialisation kernels (common/tma.cuh, warpgroup.cuh) likewise: no spills, no
// ignored setmaxnreg, and their TMA and register-reallocation instructions in the SASS.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/compiler.hpp"
#include "templates/common/wgmma.cuh"
#include "templates/moe/gemm_sm90_args.h"
#include "templates/moe/gemm_ws_args.h"
#include "templates/moe/moe_op.hpp"
#include "tests/support/hopper_source.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

using test::Sm90Tile;

TEST(Wgmma, DescriptorFields) {
  // Start 0x1400 (>> 4 = 0x140), LBO 16 (1), SBO 1024 (64), 128-byte swizzle (1 << 62).
  EXPECT_EQ(wg::sw128_desc(0x1400), 0x4000004000010140ull);
  // The kk-th k16 slice moves the start field by 2 per step (32 bytes).
  EXPECT_EQ(wg::sw128_desc(0x1400, 3 * wg::kK16Bytes) - wg::sw128_desc(0x1400), 6ull);
  EXPECT_EQ(wg::make_desc(0x3fff0, 0, 0, wg::swizzle_none), 0x3fffull);
  EXPECT_EQ(wg::make_desc(0, 0x20, 0x40, wg::swizzle_32b), 0xC000000400020000ull);
  // The highest slice of the highest atom of the 227 KiB window stays inside the 14-bit field.
  EXPECT_LE(wg::sw128_desc(227 * 1024 - 1024, 96) & 0xffff, 0x3fffull);
}

TEST(Wgmma, Sw128IsTheMoeTileLayoutAndAPermutation) {
  for (int row = 0; row < 64; ++row) {
    std::set<unsigned> seen;
    for (int chunk = 0; chunk < 8; ++chunk) {
      const unsigned off = wg::sw128_offset(row, chunk);
      // moe::Tile<64>::offset: row * 128 + ((chunk ^ (row & 7)) << 4).
      EXPECT_EQ(off, static_cast<unsigned>(row * 128 + ((chunk ^ (row & 7)) << 4)));
      // The hardware's view: address bits 4-6 XOR bits 7-9 of the unswizzled address.
      const unsigned plain = static_cast<unsigned>(row * 128 + chunk * 16);
      EXPECT_EQ(off, plain ^ (((plain >> 7) & 7) << 4));
      seen.insert(off);
    }
    EXPECT_EQ(seen.size(), 8u);
  }
}

template <int N>
void check_acc_layout() {
  using A = wg::Acc<N>;
  std::vector<int> hits(64 * N, 0);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < A::REGS; ++i) {
      const int r = A::row(t, i), c = A::col(t, i);
      ASSERT_TRUE(r >= 0 && r < 64 && c >= 0 && c < N) << "N=" << N << " t=" << t << " i=" << i;
      ++hits[r * N + c];
      // Pairs {2m, 2m + 1} are adjacent columns of one row (the epilogue packs them).
      if (i % 2 == 1) {
        EXPECT_EQ(r, A::row(t, i - 1));
        EXPECT_EQ(c, A::col(t, i - 1) + 1);
      }
    }
  for (int v : hits) EXPECT_EQ(v, 1) << "N=" << N;
  // Warp w owns rows 16w..16w+15 (its own m16 slice, as mma.sync's C fragment).
  EXPECT_EQ(A::row(37, 0), 16 + 1);
  EXPECT_EQ(A::row(37, 2), 16 + 1 + 8);
  EXPECT_EQ(A::col(37, 5), 8 + 2 + 1);
}

TEST(Wgmma, AccumulatorLayoutCoversTheTileOnce) {
  check_acc_layout<64>();
  check_acc_layout<128>();
  check_acc_layout<256>();
}

TEST(MoeGemmSm90Reasons, TableOfPoints) {
  EXPECT_EQ(moe_gemm_sm90_invalid_reason(128, 128, 64, 4, true), nullptr);
  EXPECT_EQ(moe_gemm_sm90_invalid_reason(128, 256, 64, 4, false), nullptr);
  EXPECT_EQ(moe_gemm_sm90_invalid_reason(64, 64, 64, 2, true, 8), nullptr);
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(32, 64, 64, 4, true), "BLOCK_M must be 64 or 128");
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(64, 32, 64, 4, true),
               "BLOCK_N must be 64, 128 or 256");
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(64, 64, 32, 4, true),
               "BLOCK_K must be 64 (one 128-byte swizzled row)");
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(64, 64, 64, 7, true), "STAGES must be 2 to 6");
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(64, 256, 64, 2, true),
               "more than 128 fp32 accumulators per thread (GATED counts gate and up)");
  // 128 x 128 gated: 48 KiB a stage; 4 fit, 5 do not.
  EXPECT_EQ(moe_gemm_sm90_smem_bytes(128, 128, 64, 4, true), 4u * 48 * 1024 + 1024);
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(128, 128, 64, 5, true), "shared memory above 227 KiB");
  EXPECT_STREQ(moe_gemm_sm90_invalid_reason(64, 64, 64, 3, false, 3),
               "GROUP_M must be 0, 2, 4, 8, 16 or 32");
  EXPECT_EQ(moe_gemm_sm90_threads(64), 128);
  EXPECT_EQ(moe_gemm_sm90_threads(128), 256);
}

// ---- NVRTC ----

struct Job {
  CompileJob job;
  std::string reason;     // expected static_assert message; empty: must compile
  bool pipelined = false;  // a GEMM with STAGES > 2: its wgmmas must be batched
};

std::vector<Job> jobs() {
  std::vector<Job> out;
  const std::string tile = test::wgmma_tile_source();
  const std::string gemm = test::hopper_source("moe/gemm_sm90.cuh");
  for (bool bf16 : {true, false})
    for (int n : {64, 80, 128, 256})
      out.push_back({{{"wgmma_tile", test::wgmma_tile_name(bf16, n)}, "sm_90a", tile}, ""});
  out.push_back({{{"wgmma_tile", test::wgmma_tile_name(true, 128)}, "sm_80", tile}, ""});
  // Gemm1 and gemm2 shapes an op would try at t = 1024..4096, both warpgroup counts, every
  // ring depth that fits, both dtypes.
  const struct {
    Sm90Tile t;
    bool gated;
    bool bf16;
  } sample[] = {
      {{128, 128, 4, 0}, true, true},  {{128, 128, 3, 8}, true, false},
      {{64, 128, 5, 0}, true, true},   {{64, 64, 2, 0}, true, false},
      {{128, 64, 6, 16}, true, true},  {{128, 256, 4, 0}, false, true},
      {{128, 128, 5, 8}, false, false}, {{64, 256, 3, 0}, false, true},
      {{64, 64, 6, 0}, false, true},   {{128, 64, 2, 0}, false, false},
  };
  for (const auto& s : sample) {
    EXPECT_EQ(moe_gemm_sm90_invalid_reason(s.t.block_m, s.t.block_n, 64, s.t.stages, s.gated,
                                           s.t.group_m),
              nullptr)
        << s.t.key();
    out.push_back({{{"moe/gemm_sm90.cuh", test::moe_gemm_sm90_name(s.bf16, s.t, s.gated)},
                    "sm_90a",
                    gemm},
                   "",
                   s.t.stages > 2});
  }
  for (bool gated : {true, false})
    out.push_back({{{"moe/gemm_sm90.cuh", test::moe_gemm_sm90_name(true, {128, 128, 4, 0}, gated)},
                    "sm_80",
                    gemm},
                   ""});
  // What the reasons reject, the static_asserts reject with the same words.
  out.push_back({{{"moe/gemm_sm90.cuh", test::moe_gemm_sm90_name(true, {64, 256, 3, 0}, true)},
                  "sm_90a",
                  gemm},
                 "more than 128 fp32 accumulators per thread"});
  out.push_back({{{"moe/gemm_sm90.cuh", test::moe_gemm_sm90_name(true, {128, 128, 5, 0}, true)},
                  "sm_90a",
                  gemm},
                 "shared memory above 227 KiB"});
  return out;
}

/// nvdisasm, or empty when none is found.
std::string nvdisasm_path() {
  if (const char* env = std::getenv("KTUNE_NVDISASM"); env && *env) return env;
  const char* toolkit = "/usr/local/cuda/bin/nvdisasm";
  if (std::filesystem::exists(toolkit)) return toolkit;
  if (std::system("command -v nvdisasm > /dev/null 2>&1") == 0) return "nvdisasm";
  return {};
}

std::string disassemble(const std::string& tool, const std::string& cubin,
                        const std::filesystem::path& dir, std::size_t i) {
  const std::filesystem::path file = dir / ("k" + std::to_string(i) + ".cubin");
  std::ofstream(file, std::ios::binary).write(cubin.data(), static_cast<long>(cubin.size()));
  std::string sass;
  FILE* p = popen(("'" + tool + "' '" + file.string() + "' 2>&1").c_str(), "r");
  if (p == nullptr) return sass;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) sass.append(buf, n);
  pclose(p);
  return sass;
}

int count(const std::string& text, const std::string& what) {
  int c = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++c;
  return c;
}

/// HGMMA lines that do not end their batch (no gsb0 scoreboard): ptxas batched the wgmmas.
int batched_hgmma(const std::string& sass) {
  int c = 0;
  std::size_t start = 0;
  while (start < sass.size()) {
    std::size_t end = sass.find('\n', start);
    if (end == std::string::npos) end = sass.size();
    const std::string line = sass.substr(start, end - start);
    if (line.find("HGMMA") != std::string::npos && line.find("gsb0") == std::string::npos) ++c;
    start = end + 1;
  }
  return c;
}

/// Whether `o` holds a kernel (a failure naming `what` when not), expecting registers and no
/// spills or local memory of it.
bool compiled_clean(const CompileOutcome& o, const std::string& what) {
  if (!o.kernel) {
    ADD_FAILURE() << what << " failed:\n" << o.error;
    return false;
  }
  const KernelResources& r = o.kernel->resources;
  EXPECT_GT(r.registers, 0) << what;
  EXPECT_EQ(r.spill_stores, 0) << what;
  EXPECT_EQ(r.spill_loads, 0) << what;
  EXPECT_EQ(r.local_bytes, 0) << what;
  return true;
}

// The bulk-copy ring of gpu_hopper_test (common/mbarrier.cuh) compiles for sm_90a without
// spills, and for sm_80, where its copies trap.
TEST(HopperCompile, BulkCopyRing) {
  std::vector<CompileJob> batch;
  for (const char* arch : {"sm_90a", "sm_80"})
    batch.push_back({{"bulk_ring", test::bulk_ring_name(8, 3)}, arch, test::bulk_ring_source()});
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  ASSERT_EQ(outcomes.size(), batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    ASSERT_TRUE(outcomes[i].kernel.has_value()) << batch[i].arch << ":\n" << outcomes[i].error;
    EXPECT_EQ(outcomes[i].kernel->resources.spill_stores, 0) << batch[i].arch;
  }
}

// The TMA tile kernels, the two-CTA multicast kernel (common/cluster.cuh) and the
// warp-specialised TMA pipeline of gpu_hopper_test (common/tma.cuh, mbarrier.cuh, warpgroup.cuh)
// compile for sm_90a without spills and with setmaxnreg honoured
// (no C7508 advisory), and for sm_80, where the copies trap and setmaxnreg is left out. With
// nvdisasm: the sm_90a SASS holds the TMA loads (UTMALDG), stores (UTMASTG) and register
// reallocation (USETMAXREG) where the kernel uses them; the sm_80 SASS none of them.
TEST(HopperCompile, TmaAndWarpSpecialisation) {
  struct Kernel {
    std::string name;
    std::string source;
    std::vector<std::string> sass;  // what the sm_90a SASS must hold
  };
  const std::string tile = test::tma_tile_source(), pipe = test::tma_pipeline_source();
  const Kernel kernels[] = {
      {test::tma_load_tile_name(64, 64), tile, {"UTMALDG.2D"}},
      {test::tma_multicast_name(64), test::tma_multicast_source(), {"UTMALDG.2D"}},
      {test::tma_store_tile_name(64, 64, false), tile, {"UTMASTG.2D"}},
      {test::tma_store_tile_name(64, 64, true), tile, {"UTMASTG.2D"}},
      {test::tma_pipeline_name(3), pipe, {"UTMALDG.2D", "USETMAXREG"}},
      {test::tma_pipeline_name(4), pipe, {"UTMALDG.2D", "USETMAXREG"}},
  };
  std::vector<CompileJob> batch;
  std::vector<const Kernel*> of;
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const Kernel& k : kernels) {
      batch.push_back({{"tma", k.name}, arch, k.source});
      of.push_back(&k);
    }
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  ASSERT_EQ(outcomes.size(), batch.size());
  const std::string tool = nvdisasm_path();
  if (tool.empty()) std::printf("nvdisasm not found: SASS not checked\n");
  const test::TempDir dir;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::string what = batch[i].source.name_expression + " for " + batch[i].arch;
    const CompileOutcome& o = outcomes[i];
    if (!compiled_clean(o, what)) continue;
    const KernelResources& r = o.kernel->resources;
    EXPECT_EQ(o.kernel->log.find("C7508"), std::string::npos) << what << ":\n" << o.kernel->log;
    std::string note = "-";
    if (!tool.empty()) {
      const std::string sass = disassemble(tool, o.kernel->cubin, dir.path(), 1000 + i);
      note.clear();
      for (const char* op : {"UTMALDG", "UTMASTG", "USETMAXREG"}) {
        const int n = count(sass, op);
        note += std::string(op) + " " + std::to_string(n) + " ";
        if (batch[i].arch != "sm_90a") {
          EXPECT_EQ(n, 0) << what << ": " << op;
        }
      }
      if (batch[i].arch == "sm_90a") {
        for (const std::string& op : of[i]->sass) {
          EXPECT_GT(count(sass, op), 0) << what << ": no " << op << " in the SASS";
        }
      }
    }
    std::printf("%-6s %-52s %3d registers, %5d B smem, %s\n", batch[i].arch.c_str(),
                batch[i].source.name_expression.c_str(), r.registers, r.shared_bytes,
                note.c_str());
  }
}

TEST(HopperCompile, WgmmaTileAndMoeGemmSm90) {
  const std::vector<Job> js = jobs();
  std::vector<CompileJob> batch;
  for (const Job& j : js) batch.push_back(j.job);
  std::printf("compiling %zu kernels\n", batch.size());
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  ASSERT_EQ(outcomes.size(), js.size());
  const std::string tool = nvdisasm_path();
  if (tool.empty()) std::printf("nvdisasm not found: SASS not checked\n");
  const test::TempDir dir;
  for (std::size_t i = 0; i < js.size(); ++i) {
    const Job& j = js[i];
    const CompileOutcome& o = outcomes[i];
    const std::string what = j.job.source.name_expression + " for " + j.job.arch;
    if (!j.reason.empty()) {
      EXPECT_FALSE(o.kernel.has_value()) << what << " compiled";
      EXPECT_NE(o.error.find(j.reason), std::string::npos) << what << ":\n" << o.error;
      continue;
    }
    if (!compiled_clean(o, what)) continue;
    const KernelResources& r = o.kernel->resources;
    // ptxas' performance advisories ("wgmma.mma_async instructions are serialized due to ...").
    EXPECT_EQ(o.kernel->log.find("serialized"), std::string::npos) << what << ":\n"
                                                                    << o.kernel->log;
    std::string sass_note = "-";
    if (!tool.empty()) {
      const std::string sass = disassemble(tool, o.kernel->cubin, dir.path(), i);
      const int hgmma = count(sass, "HGMMA");
      sass_note = std::to_string(hgmma) + " HGMMA";
      if (j.job.arch == "sm_90a") {
        EXPECT_GT(hgmma, 0) << what << ": no HGMMA in the SASS";
        if (j.pipelined) {
          const int batched = batched_hgmma(sass);
          sass_note += ", " + std::to_string(batched) + " batched";
          EXPECT_GT(batched, 0) << what << ": every wgmma waited for alone";
        }
      } else {
        EXPECT_EQ(hgmma, 0) << what;
      }
    }
    std::printf("%-6s %-72s %3d registers, %5d B smem, spills %d/%d, %s\n", j.job.arch.c_str(),
                j.job.source.name_expression.c_str(), r.registers, r.shared_bytes,
                r.spill_stores, r.spill_loads, sass_note.c_str());
  }
}

// The warp-specialised MoE GEMM (moe/gemm_ws_sm90.cuh, impl=2): a sample of the points the op
// searches (both warpgroup counts, both gathers of gemm1, deep and shallow rings, both dtypes)
// compiles for sm_90a without spills, without serialised wgmmas (C7513's "serialized"), with
// setmaxnreg honoured (no C7508); its SASS holds HGMMA, batched, UTMALDG and, with two consumer
// warpgroups, USETMAXREG. It compiles for sm_80 too (to a trap), and the static_asserts reject
// what moe_gemm_ws_invalid_reason rejects.
TEST(HopperCompile, MoeGemmWarpSpecialised) {
  struct Point {
    int bm, bn, stages;
    bool gated;
    int group, gather;
    const char* type;
  };
  // e4m3: gemm1 (gated) sums each k-tile in a second accumulator set, so its BLOCK_N <= 64.
  const Point sample[] = {
      {128, 128, 4, true, 0, 0, "bf16"},  {128, 128, 4, true, 8, 1, "fp16"},
      {64, 128, 5, true, 0, 0, "bf16"},   {128, 64, 6, true, 16, 0, "fp16"},
      {128, 256, 4, false, 8, 0, "bf16"}, {128, 128, 6, false, 0, 0, "fp16"},
      {64, 256, 4, false, 8, 0, "bf16"},  {64, 64, 2, true, 0, 0, "bf16"},
      {128, 64, 4, true, 0, 0, "e4m3"},   {64, 64, 6, true, 8, 1, "e4m3"},
      {128, 256, 4, false, 8, 0, "e4m3"},
      // Three consumer warpgroups (512 threads, 128 registers each at launch).
      {192, 128, 3, true, 0, 0, "bf16"},  {192, 64, 4, true, 8, 1, "fp16"},
      {192, 128, 4, false, 8, 0, "bf16"},
      // gemm1 on rows already gathered in sorted order (GATHER 2, benchmarks/moe/gemm_ws_dev.cu).
      {128, 128, 4, true, 0, 2, "bf16"},  {64, 64, 3, true, 8, 2, "fp16"},
  };
  const auto name = [](const Point& p) {
    return std::string("ktune::moe_gemm_ws_kernel<ktune::") + p.type + ", " +
           std::to_string(p.bm) + ", " + std::to_string(p.bn) + ", " +
           std::to_string(p.stages) + ", " + (p.gated ? "true" : "false") + ", " +
           std::to_string(p.group) + ", " + std::to_string(p.gather) + ">";
  };
  const std::string source = test::hopper_source("moe/gemm_ws_sm90.cuh");
  std::vector<CompileJob> batch;
  std::vector<std::string> reasons;  // expected static_assert message; empty: must compile
  std::vector<int> consumers;         // consumer warpgroups of batch[i]
  for (const Point& p : sample) {
    consumers.push_back(p.bm / 64);
    EXPECT_EQ(moe_gemm_ws_invalid_reason(p.bm, p.bn, p.stages, p.gated, p.group, p.gather),
              nullptr)
        << name(p);
    batch.push_back({{"moe/gemm_ws_sm90.cuh", name(p)}, "sm_90a", source});
    reasons.emplace_back();
  }
  batch.push_back({{"moe/gemm_ws_sm90.cuh", name(sample[0])}, "sm_80", source});
  reasons.emplace_back();
  consumers.push_back(2);
  const Point bad[] = {{128, 256, 3, true, 0, 0, "bf16"}, {128, 128, 5, true, 0, 0, "bf16"},
                       {192, 256, 3, false, 8, 0, "bf16"}, {192, 128, 4, true, 0, 0, "bf16"}};
  for (const Point& p : bad) {
    const char* why = moe_gemm_ws_invalid_reason(p.bm, p.bn, p.stages, p.gated, p.group, p.gather);
    ASSERT_NE(why, nullptr) << name(p);
    batch.push_back({{"moe/gemm_ws_sm90.cuh", name(p)}, "sm_90a", source});
    reasons.emplace_back(why);
    consumers.push_back(p.bm / 64);
  }
  // The persistent forms (16-bit; a fixed stride, tiles from a counter): compiled like the
  // others, checked below the same way.
  const std::pair<const char*, int> persistent[] = {
      {"ktune::moe_gemm_ws_persistent_kernel<ktune::bf16, 128, 128, 4, true, 0>", 2},
      {"ktune::moe_gemm_ws_persistent_kernel<ktune::fp16, 128, 256, 4, false, 8>", 2},
      {"ktune::moe_gemm_ws_persistent_kernel<ktune::bf16, 64, 128, 5, true, 8>", 1},
      {"ktune::moe_gemm_ws_dynamic_kernel<ktune::bf16, 128, 128, 4, true, 8>", 2},
      {"ktune::moe_gemm_ws_dynamic_kernel<ktune::fp16, 128, 256, 4, false, 0>", 2},
      {"ktune::moe_gemm_ws_dynamic_kernel<ktune::bf16, 64, 128, 5, true, 0>", 1}};
  // Clusters of two sharing the weight tile by multicast (CLUSTER = 2): both GEMMs, e4m3.
  const std::pair<const char*, int> clustered[] = {
      {"ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 128, 4, true, 8, 0, 2>", 2},
      {"ktune::moe_gemm_ws_kernel<ktune::fp16, 128, 256, 4, false, 0, 0, 2>", 2},
      {"ktune::moe_gemm_ws_kernel<ktune::e4m3, 64, 64, 6, true, 8, 1, 2>", 1},
      // Clusters of two along y sharing the act tile (CLUSTER = 3): gemm2, gemm1 on sorted rows.
      {"ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 256, 4, false, 8, 0, 3>", 2},
      {"ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 128, 4, true, 0, 2, 3>", 2},
      {"ktune::moe_gemm_ws_kernel<ktune::fp16, 64, 64, 3, true, 8, 2, 3>", 1}};
  std::vector<std::pair<const char*, int>> extra(std::begin(persistent), std::end(persistent));
  extra.insert(extra.end(), std::begin(clustered), std::end(clustered));
  for (const auto& [expr, n] : extra) {
    batch.push_back({{"moe/gemm_ws_sm90.cuh", expr}, "sm_90a", source});
    reasons.emplace_back();
    consumers.push_back(n);
  }
  batch.push_back(
      {{"moe/gemm_ws_sm90.cuh", name({128, 128, 4, true, 0, 0, "e4m3"})}, "sm_90a", source});
  reasons.emplace_back("e4m3 gemm1 keeps a second set of accumulators");
  consumers.push_back(2);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  std::printf("%zu kernels in %.1f s\n", batch.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  ASSERT_EQ(outcomes.size(), batch.size());
  const std::string tool = nvdisasm_path();
  if (tool.empty()) std::printf("nvdisasm not found: SASS not checked\n");
  const test::TempDir dir;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::string what = batch[i].source.name_expression + " for " + batch[i].arch;
    const CompileOutcome& o = outcomes[i];
    if (!reasons[i].empty()) {
      EXPECT_FALSE(o.kernel.has_value()) << what << " compiled";
      EXPECT_NE(o.error.find(reasons[i]), std::string::npos) << what << ":\n" << o.error;
      continue;
    }
    if (!compiled_clean(o, what)) continue;
    const KernelResources& r = o.kernel->resources;
    EXPECT_EQ(o.kernel->log.find("serialized"), std::string::npos) << what << ":\n"
                                                                    << o.kernel->log;
    EXPECT_EQ(o.kernel->log.find("C7508"), std::string::npos) << what << ":\n" << o.kernel->log;
    std::string note = "-";
    if (!tool.empty()) {
      const std::string sass = disassemble(tool, o.kernel->cubin, dir.path(), 2000 + i);
      const int hgmma = count(sass, "HGMMA"), tma = count(sass, "UTMALDG"),
                setmax = count(sass, "USETMAXREG");
      note = std::to_string(hgmma) + " HGMMA, " + std::to_string(batched_hgmma(sass)) +
             " batched, UTMALDG " + std::to_string(tma) + ", USETMAXREG " +
             std::to_string(setmax);
      if (batch[i].arch == "sm_90a") {
        EXPECT_GT(batched_hgmma(sass), 0) << what << ": every wgmma waited for alone";
        EXPECT_GT(tma, 0) << what << ": no TMA load in the SASS";
        if (consumers[i] == 2) {
          EXPECT_GT(setmax, 0) << what << ": two consumers, no register reallocation";
        }
      } else {
        EXPECT_EQ(hgmma, 0) << what;
      }
    }
    std::printf("%-6s %-66s %3d registers, %6d B smem, %s\n", batch[i].arch.c_str(),
                batch[i].source.name_expression.c_str(), r.registers, r.shared_bytes,
                note.c_str());
  }
}

// The MoE op's gather1=2 and cluster=3 points as the op names them: the gather kernel (both
// 16-bit types, sm_90a and sm_80) and the warp-specialised GEMMs of a few valid points compile
// for sm_90a without spills.
TEST(HopperCompile, MoeOpSortedGatherAndColumnClusters) {
  const Op& op = moe_op();
  const DeviceInfo h100 = *device_for_arch("sm_90a");
  const Problem p = op.parse_problem("e=8,k=2,h=4096,i=14336,t=4096");
  // The default (block_m 128, both GEMMs warp-specialised) and a 64-row form of it.
  const Params wide = op.default_params(p, DType::bf16, h100);
  ASSERT_EQ(op.param(wide, "impl1"), 2);
  ASSERT_EQ(op.param(wide, "block_m"), 128);
  const auto with = [&](Params q, const std::vector<std::pair<const char*, std::int64_t>>& v) {
    for (const auto& [n, x] : v) q.values[op.param_index(n)] = x;
    return q;
  };
  const Params narrow = with(wide, {{"block_m", 64}, {"warps1", 4}, {"warps2", 4}, {"bn1", 64},
                                    {"stages1", 6}, {"group1", 8}, {"bn2", 128}, {"stages2", 3},
                                    {"group2", 0}});
  struct Point {
    Params params;
    DType dtype;
  };
  const Point points[] = {{with(wide, {{"gather1", 2}}), DType::bf16},
                          {with(wide, {{"gather1", 2}, {"cluster1", 3}, {"cluster2", 3}}),
                           DType::bf16},
                          {with(narrow, {{"gather1", 2}, {"cluster1", 3}}), DType::f16},
                          {with(narrow, {{"cluster2", 3}}), DType::bf16}};
  // Compiled by MoeGemmWarpSpecialised above.
  const std::set<std::string> covered = {
      "ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 128, 4, true, 0, 2>",
      "ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 128, 4, true, 0, 2, 3>",
      "ktune::moe_gemm_ws_kernel<ktune::bf16, 128, 256, 4, false, 8, 0, 3>"};
  std::vector<CompileJob> batch;
  std::set<std::string> seen;
  for (const Point& pt : points) {
    const Params& q = pt.params;
    ASSERT_EQ(op.invalid_reason(q, p, pt.dtype, h100), std::nullopt)
        << op.params_key(q) << ": " << *op.invalid_reason(q, p, pt.dtype, h100);
    for (const KernelSource& k : op.kernels(q, p, pt.dtype)) {
      const std::string& e = k.name_expression;
      const bool fresh = e.find(", 2>") != std::string::npos ||
                         e.find(", 3>") != std::string::npos;
      if (k.file != "moe/gather_rows.cuh" && (k.file != "moe/gemm_ws_sm90.cuh" || !fresh))
        continue;
      if (!seen.insert(e).second || covered.count(e)) continue;
      batch.push_back({k, "sm_90a", test::hopper_source(k.file)});
      if (k.file == "moe/gather_rows.cuh")
        batch.push_back({k, "sm_80", test::hopper_source(k.file)});
    }
  }
  EXPECT_TRUE(seen.count("ktune::moe_gather_rows_kernel<ktune::bf16>"));
  EXPECT_TRUE(seen.count("ktune::moe_gather_rows_kernel<ktune::fp16>"));
  EXPECT_TRUE(seen.count("ktune::moe_gemm_ws_kernel<ktune::fp16, 64, 64, 6, true, 8, 2, 3>"));
  EXPECT_TRUE(seen.count("ktune::moe_gemm_ws_kernel<ktune::bf16, 64, 128, 3, false, 0, 0, 3>"));
  EXPECT_GE(seen.size(), 6u);  // two gathers and at least four GEMMs
  const std::vector<CompileOutcome> outcomes = compile_parallel(Compiler(std::nullopt), batch, 0);
  ASSERT_EQ(outcomes.size(), batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::string what = batch[i].source.name_expression + " for " + batch[i].arch;
    if (!compiled_clean(outcomes[i], what)) continue;
    EXPECT_EQ(outcomes[i].kernel->log.find("C7508"), std::string::npos)
        << what << ":\n" << outcomes[i].kernel->log;
    std::printf("%-6s %-70s %3d registers\n", batch[i].arch.c_str(),
                batch[i].source.name_expression.c_str(), outcomes[i].kernel->resources.registers);
  }
}

}  // namespace
}  // namespace ktune
