// Runtime::moe and ktune_moe before the GPU: every bad argument gets one message naming it and
// what is allowed, before any CUDA call (on a machine without a GPU a CUDA call would throw
// NoDevice instead); the arguments reach the planner in the op's order; the tables the checks
// use follow the op description; the workspace rules. No GPU needed (GPU half:
// gpu_moe_runtime_test).
#include "runtime/dispatch/moe_args.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "runtime/dispatch/planner.hpp"
#include "templates/moe/moe_op.hpp"
#include "tests/support/test_env.hpp"

// Every allocation of the process, counted (PackingAValidCallAllocatesNothing).
std::atomic<long> g_allocations{0};

void* operator new(std::size_t bytes) {
  ++g_allocations;
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
// GCC pairs the inlined operator new with this free() and warns, though they match.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace ktune {
namespace {

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected '" << (part) << "' in: " << (text)

/// A fake device address (never dereferenced: every call here fails before the GPU).
template <typename T = void>
T* at(std::uint64_t a) {
  return reinterpret_cast<T*>(a);
}

/// Valid arguments in MoeArgs or ktune_moe_args (one field names in both): softmax_renorm (the
/// default), e=8, k=2, h=136, i=200, t=33, bf16, fake addresses.
template <typename Args>
Args valid(Args a) {
  a.x = at(0x100000);
  a.logits = at<const float>(0x200000);
  a.w1 = at(0x300000);
  a.w2 = at(0x400000);
  a.y = at(0x500000);
  a.e = 8, a.k = 2, a.h = 136, a.i = 200, a.t = 33;
  return a;
}

MoeArgs valid_args() { return valid(MoeArgs{}); }

MoeArgs precomputed_args() {
  MoeArgs a = valid_args();
  a.routing = MoeRoutingMode::precomputed;
  a.logits = nullptr;
  a.topk_ids = at<std::int32_t>(0x600000);
  a.topk_weights = at<float>(0x700000);
  return a;
}

RuntimeOptions options(const test::TempDir& dir) {
  RuntimeOptions o;
  o.db_path = (dir.path() / "user.db").string();
  o.use_shipped_databases = false;
  o.cache_dir = (dir.path() / "cache").string();
  return o;
}

struct BadArgs {
  const char* what;
  std::function<void(MoeArgs&)> change;
  std::vector<std::string> message;  // parts of the expected message
};

const std::vector<BadArgs>& bad_args() {
  static const std::vector<BadArgs> cases = {
      {"x null", [](MoeArgs& a) { a.x = nullptr; }, {"moe: x is null (required)"}},
      {"w2 null", [](MoeArgs& a) { a.w2 = nullptr; }, {"moe: w2 is null (required)"}},
      {"y null", [](MoeArgs& a) { a.y = nullptr; }, {"moe: y is null (required)"}},
      {"logits null",
       [](MoeArgs& a) { a.logits = nullptr; },
       {"moe: logits is null, but routing=softmax_renorm needs it (it may be null with "
        "precomputed)"}},
      {"precomputed without ids",
       [](MoeArgs& a) { a = precomputed_args(), a.topk_ids = nullptr; },
       {"moe: topk_ids is null, but routing=precomputed needs it (it may be null with softmax, "
        "softmax_renorm, sigmoid_group"}},
      {"precomputed without weights",
       [](MoeArgs& a) { a = precomputed_args(), a.topk_weights = nullptr; },
       {"moe: topk_weights is null, but routing=precomputed needs it"}},
      {"precomputed with logits",
       [](MoeArgs& a) { a = precomputed_args(), a.logits = at<const float>(0x200000); },
       {"moe: logits is set, but routing=precomputed does not use it (it is used with softmax, "
        "softmax_renorm, sigmoid_group"}},
      {"precomputed with aux_loss",
       [](MoeArgs& a) { a = precomputed_args(), a.aux_loss = at<float>(0x800000); },
       {"moe: aux_loss is set, but routing=precomputed does not use it"}},
      {"correction_bias without sigmoid_group",
       [](MoeArgs& a) { a.correction_bias = at<const float>(0x900000); },
       {"moe: correction_bias is set, but routing=softmax_renorm does not use it (it is used "
        "with sigmoid_group only): pass null"}},
      {"w1 misaligned",
       [](MoeArgs& a) { a.w1 = at(0x300002); },
       {"moe: w1 at 0x300002 is not 16-byte aligned (every moe tensor must be)"}},
      {"topk_ids 8-byte aligned",
       [](MoeArgs& a) { a.topk_ids = at<std::int32_t>(0x600008); },
       {"moe: topk_ids at 0x600008 is not 16-byte aligned"}},
      {"aux_loss misaligned",
       [](MoeArgs& a) { a.aux_loss = at<float>(0x800004); },
       {"moe: aux_loss at 0x800004 is not 16-byte aligned"}},
      {"routing out of range",
       [](MoeArgs& a) { a.routing = static_cast<MoeRoutingMode>(7); },
       {"moe: routing 7 is not one of softmax (0), softmax_renorm (1), sigmoid_group (2), "
        "precomputed (3)"}},
      {"dtype fp32",
       [](MoeArgs& a) { a.dtype = DType::f32; },
       {"moe: dtype fp32 (0) is not supported (allowed: bf16, fp16, e4m3)"}},
      {"e4m3 without w1_scale",
       [](MoeArgs& a) {
         a.dtype = DType::e4m3;
         a.w2_scale = at<const float>(0xb00000);
       },
       {"moe: w1_scale is null, but dtype e4m3 needs it"}},
      {"scales with bf16 weights",
       [](MoeArgs& a) { a.w2_scale = at<const float>(0xb00000); },
       {"moe: w2_scale is set, but dtype bf16 does not use it (e4m3 only): pass null"}},
      {"k > e", [](MoeArgs& a) { a.k = 9; }, {"k=9 exceeds e=8"}},
      {"t = 0", [](MoeArgs& a) { a.t = 0; }, {"t=0 is out of range"}},
      {"e too large", [](MoeArgs& a) { a.e = 600; }, {"e=600 is out of range (allowed 1..512)"}},
      {"h not a multiple of 8", [](MoeArgs& a) { a.h = 100; }, {"h=100, i=200"}},
      {"groups without sigmoid_group",
       [](MoeArgs& a) { a.n_group = 2; },
       {"n_group and topk_group apply to routing=sigmoid_group only"}},
      {"e not a multiple of n_group",
       [](MoeArgs& a) { a.routing = MoeRoutingMode::sigmoid_group, a.n_group = 3; },
       {"e=8 is not a multiple of n_group=3"}},
      {"topk_group > n_group",
       [](MoeArgs& a) {
         a.routing = MoeRoutingMode::sigmoid_group, a.n_group = 2, a.topk_group = 4;
       },
       {"topk_group=4 exceeds n_group=2"}},
      {"routed_scaling without sigmoid_group",
       [](MoeArgs& a) { a.routed_scaling = 2.5f; },
       {"moe: routed_scaling=2.5 has no effect with routing=softmax_renorm (only with "
        "sigmoid_group): leave it 1"}},
      {"routed_scaling NaN",
       [](MoeArgs& a) { a.routing = MoeRoutingMode::sigmoid_group, a.routed_scaling = NAN; },
       {"moe: routed_scaling=nan is not finite"}},
      {"workspace size without pointer",
       [](MoeArgs& a) { a.workspace_bytes = 4096; },
       {"moe: workspace is null but workspace_bytes is 4096: pass both"}},
      {"workspace misaligned",
       [](MoeArgs& a) { a.workspace = at(0xa00010), a.workspace_bytes = 1 << 20; },
       {"moe: workspace at 0xa00010 is not aligned to 256 bytes"}},
  };
  return cases;
}

bool no_gpu() { return !test::gpu_missing_reason().empty(); }

TEST(MoeArgs, EveryBadArgumentIsNamedBeforeAnyCudaCall) {
  test::TempDir dir;
  Runtime rt(options(dir));
  for (const BadArgs& c : bad_args()) {
    MoeArgs a = valid_args();
    c.change(a);
    try {
      rt.moe(a, nullptr);
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const InvalidArgument& e) {
      for (const std::string& part : c.message) EXPECT_CONTAINS(e.what(), part) << c.what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.what << ": not an InvalidArgument: " << e.what();
    }
  }
}

TEST(MoeArgs, ValidArgumentsReachTheDevice) {
  if (!no_gpu()) GTEST_SKIP() << "a GPU is here: fake addresses would be launched";
  test::TempDir dir;
  Runtime rt(options(dir));
  MoeArgs sigmoid = valid_args();
  sigmoid.routing = MoeRoutingMode::sigmoid_group;
  sigmoid.n_group = 4, sigmoid.topk_group = 2, sigmoid.routed_scaling = 2.5f;
  sigmoid.correction_bias = at<const float>(0x900000);
  MoeArgs outputs = valid_args();
  outputs.topk_ids = at<std::int32_t>(0x600000);
  outputs.topk_weights = at<float>(0x700000);
  outputs.expert_counts = at<std::int32_t>(0x800000);
  outputs.aux_loss = at<float>(0x810000);
  MoeArgs caller = precomputed_args();
  caller.workspace = at(0xa00000), caller.workspace_bytes = 1;  // its size is checked once planned
  MoeArgs fp16 = valid_args();
  fp16.dtype = DType::f16;
  std::vector<MoeArgs> all = {valid_args(), precomputed_args(), sigmoid, outputs, caller, fp16};
  if (moe_op().dims()[5].choices.size() > 4) {
    MoeArgs expert_choice = outputs;
    expert_choice.routing = MoeRoutingMode::expert_choice;
    expert_choice.aux_loss = nullptr;
    all.push_back(expert_choice);
  }
  for (const MoeArgs& a : all) {
    EXPECT_THROW(rt.moe(a, nullptr), NoDevice);
    EXPECT_THROW(rt.moe_workspace_size(a), NoDevice);
  }
  // The size query looks at the problem only: pointers may be anything.
  MoeArgs problem_only;
  problem_only.e = 8, problem_only.k = 2, problem_only.h = 136, problem_only.i = 200,
  problem_only.t = 33;
  EXPECT_THROW(rt.moe_workspace_size(problem_only), NoDevice);
  problem_only.k = 9;
  EXPECT_THROW(rt.moe_workspace_size(problem_only), InvalidArgument);
}

TEST(MoeArgs, PackedInTheOpsOrder) {
  MoeArgs a = valid_args();
  a.routing = MoeRoutingMode::sigmoid_group;
  a.n_group = 4, a.topk_group = 2, a.routed_scaling = 2.5f;
  a.correction_bias = at<const float>(0x900000);
  a.topk_ids = at<std::int32_t>(0x600000);
  a.topk_weights = at<float>(0x700000);
  a.expert_counts = at<std::int32_t>(0x800000);
  a.aux_loss = at<float>(0x810000);
  a.workspace = at(0xa00000), a.workspace_bytes = 12345;
  const MoeCall c = pack_moe(a);
  const Op& op = moe_op();
  const Problem p{std::vector<std::int64_t>(c.dims.begin(), c.dims.begin() + c.ndims)};
  EXPECT_EQ(op.problem_key(p),
            "e=8,k=2,h=136,i=200,t=33,routing=sigmoid_group,n_group=4,topk_group=2");
  const std::vector<TensorSpec> specs = op.tensors(p, DType::bf16);
  ASSERT_EQ(c.ntensors, static_cast<int>(specs.size()));
  const std::map<std::string, std::uint64_t> want = {{"x", 0x100000},
                                                     {"logits", 0x200000},
                                                     {"correction_bias", 0x900000},
                                                     {"topk_ids", 0x600000},
                                                     {"topk_weights", 0x700000},
                                                     {"w1", 0x300000},
                                                     {"w2", 0x400000},
                                                     {"y", 0x500000},
                                                     {"expert_counts", 0x800000},
                                                     {"aux_loss", 0x810000},
                                                     {"w1_scale", 0},
                                                     {"w2_scale", 0}};
  for (std::size_t t = 0; t < specs.size(); ++t)
    EXPECT_EQ(c.tensors[t], want.at(specs[t].name)) << specs[t].name;
  ASSERT_EQ(c.nscalars, 1);
  EXPECT_EQ(op.scalars()[0].name, "routed_scaling");
  EXPECT_EQ(c.scalars[0], 2.5);
  EXPECT_EQ(c.workspace.ptr, 0xa00000u);
  EXPECT_EQ(c.workspace.bytes, 12345u);

  // The size query packs the problem alone.
  MoeArgs bare;
  bare.e = 8, bare.k = 2, bare.h = 136, bare.i = 200, bare.t = 33;
  const MoeCall q = pack_moe(bare, false);
  EXPECT_EQ(q.ndims, 8);
  EXPECT_FALSE(q.workspace.given());
}

// The checks run on every call: they allocate nothing unless they throw.
TEST(MoeArgs, PackingAValidCallAllocatesNothing) {
  MoeArgs sigmoid = valid_args();
  sigmoid.routing = MoeRoutingMode::sigmoid_group;
  sigmoid.n_group = 4, sigmoid.topk_group = 2, sigmoid.routed_scaling = 2.5f;
  sigmoid.aux_loss = at<float>(0x800000);
  MoeArgs caller = precomputed_args();
  caller.workspace = at(0xa00000), caller.workspace_bytes = 1 << 20;
  {
    const long before = g_allocations.load();
    const std::vector<double> counted(100, 1.0);  // the counter counts
    EXPECT_EQ(g_allocations.load() - before, 1) << counted.size();
  }
  for (const MoeArgs& a : {valid_args(), sigmoid, caller}) {
    pack_moe(a);  // the first call of a thread sizes its scratch
    const long before = g_allocations.load();
    std::uint64_t sum = 0;
    for (int n = 0; n < 100; ++n) sum += pack_moe(a).tensors[0];
    const StreamKey key = stream_key(CU_STREAM_PER_THREAD);
    const bool fits = !workspace_reason("moe", {0xa00000, 4096}, 4096, "params").has_value();
    EXPECT_EQ(g_allocations.load() - before, 0);
    EXPECT_EQ(sum, 100u * 0x100000u);
    EXPECT_TRUE(fits && key == stream_key(CU_STREAM_PER_THREAD));
  }
}

// pack_moe() checks pointers against one table per routing mode: what op.tensors() says, for
// any problem of that mode.
TEST(MoeArgs, TensorTableFollowsTheOp) {
  const Op& op = moe_op();
  const std::size_t routing = 5;
  ASSERT_EQ(op.dims()[routing].name, "routing");
  ASSERT_EQ(moe_tensor_uses(DType::bf16).size(), op.dims()[routing].choices.size());
  const char* shapes[] = {"e=8,k=2,h=136,i=200,t=1", "e=64,k=8,h=4096,i=1408,t=1000",
                          "e=1,k=1,h=8,i=8,t=65536", "e=256,k=16,h=7168,i=2048,t=17",
                          "e=512,k=10,h=2048,i=512,t=77"};
  for (std::size_t mode = 0; mode < op.dims()[routing].choices.size(); ++mode)
    for (const char* shape : shapes) {
      Problem p = op.parse_problem(shape);
      p.values[routing] = static_cast<std::int64_t>(mode);
      if (op.dims()[routing].choices[mode] == "sigmoid_group") {
        p.values[6] = p.values[0] % 4 == 0 ? 4 : 1;  // n_group
        p.values[7] = p.values[6];                   // topk_group
      }
      ASSERT_EQ(op.problem_reason(p), std::nullopt) << op.problem_key(p);
      for (DType t : op.dtypes()) {
        const std::vector<std::vector<MoeTensorUse>>& uses = moe_tensor_uses(t);
        const std::vector<TensorSpec> specs = op.tensors(p, t);
        ASSERT_EQ(specs.size(), uses[mode].size());
        for (std::size_t i = 0; i < specs.size(); ++i) {
          EXPECT_EQ(uses[mode][i].name, specs[i].name);
          EXPECT_EQ(uses[mode][i].required, !specs[i].optional)
              << op.problem_key(p) << " " << specs[i].name;
          EXPECT_EQ(uses[mode][i].used, specs[i].elements > 0)
              << op.problem_key(p) << " " << specs[i].name;
        }
      }
    }
}

// The public enums are the op's routing choices, by index; a choice the op gains needs its
// value in both.
TEST(MoeArgs, RoutingEnumsAreTheOpsChoices) {
  const std::vector<std::string>& choices = moe_op().dims()[5].choices;
  const std::pair<MoeRoutingMode, ktune_moe_routing> modes[] = {
      {MoeRoutingMode::softmax, KTUNE_MOE_SOFTMAX},
      {MoeRoutingMode::softmax_renorm, KTUNE_MOE_SOFTMAX_RENORM},
      {MoeRoutingMode::sigmoid_group, KTUNE_MOE_SIGMOID_GROUP},
      {MoeRoutingMode::precomputed, KTUNE_MOE_PRECOMPUTED},
      {MoeRoutingMode::expert_choice, KTUNE_MOE_EXPERT_CHOICE}};
  const char* names[] = {"softmax", "softmax_renorm", "sigmoid_group", "precomputed",
                         "expert_choice"};
  EXPECT_LE(choices.size(), std::size(modes)) << "a routing mode of the op has no public value";
  for (std::size_t m = 0; m < std::size(modes); ++m) {
    EXPECT_EQ(static_cast<std::size_t>(modes[m].first), m);
    EXPECT_EQ(static_cast<std::size_t>(modes[m].second), m);
    if (m < choices.size()) {
      EXPECT_EQ(choices[m], names[m]);
    }
  }
}

// kMoeAlignment is checked before a configuration is picked: it must be what the op asks of
// every configuration.
TEST(MoeArgs, AlignmentIsTheOpsForEveryConfiguration) {
  const Op& op = moe_op();
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const char* shape : {"e=8,k=2,h=136,i=200,t=33", "e=64,k=8,h=4096,i=1408,t=5000",
                              "e=8,k=1,h=4096,i=14336,t=1,routing=precomputed"})
      for (DType t : op.dtypes()) {
        const Problem p = op.parse_problem(shape);
        EXPECT_EQ(op.alignment(op.default_params(p, t, *device_for_arch(arch)), p, t),
                  kMoeAlignment);
      }
  const Problem p = op.parse_problem("e=64,k=8,h=136,i=200,t=1000");
  for (const char* params :
       {"block_m=32,bn1=32,bk1=64,warps1=4,warps_m1=2,stages1=4,group1=0,prefetch1=0,epi1=0,impl1=0,bn2=64,bk2=32,warps2=8,"
        "warps_m2=2,stages2=2,group2=0,prefetch2=0,epi2=0,impl2=0,align_chunk=4096,route_lanes=32,route_vec=1,combine_vec=4,split2=1",
        "block_m=128,bn1=64,bk1=32,warps1=8,warps_m1=2,stages1=3,group1=8,prefetch1=256,epi1=0,impl1=0,bn2=128,bk2=64,warps2=8,"
        "warps_m2=2,stages2=3,group2=8,prefetch2=256,epi2=1,impl2=0,align_chunk=0,route_lanes=8,route_vec=4,combine_vec=8,split2=1"})
    EXPECT_EQ(op.alignment(op.parse_params(params), p, DType::f16), kMoeAlignment);
}

TEST(MoeWorkspace, CallerWorkspaceRules) {
  const std::string params = "block_m=16,bn1=64";
  EXPECT_EQ(workspace_reason("moe", {}, 0, params), std::nullopt);
  EXPECT_EQ(workspace_reason("moe", {0x1000, 5000}, 5000, params), std::nullopt);
  EXPECT_EQ(workspace_reason("moe", {0x1000, 9000}, 5000, params), std::nullopt);
  const std::optional<std::string> small = workspace_reason("moe", {0x1000, 4999}, 5000, params);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small,
            "moe: workspace_bytes 4999 is smaller than the 5000 bytes configuration "
            "block_m=16,bn1=64 needs (Runtime::moe_workspace_size() or "
            "ktune_moe_workspace_size() say how many)");
  const std::optional<std::string> zero = workspace_reason("moe", {0x1000, 0}, 5000, params);
  ASSERT_TRUE(zero);
  EXPECT_CONTAINS(*zero, "workspace_bytes 0 is smaller than the 5000 bytes");
  const std::optional<std::string> null = workspace_reason("moe", {0, 64}, 5000, params);
  ASSERT_TRUE(null);
  EXPECT_CONTAINS(*null, "workspace is null but workspace_bytes is 64");
  const std::optional<std::string> odd = workspace_reason("moe", {0x1080, 9000}, 5000, params);
  ASSERT_TRUE(odd);
  EXPECT_CONTAINS(*odd, "workspace at 0x1080 is not aligned to 256 bytes");
  EXPECT_FALSE(CallerWorkspace{}.given());
  EXPECT_TRUE((CallerWorkspace{0, 1}).given());
}

TEST(MoeWorkspace, OnePerStreamAndPerThreadForThePerThreadStream) {
  const auto key_on_other_thread = [](Stream s) {
    StreamKey k;
    std::thread([&] { k = stream_key(s); }).join();
    return k;
  };
  const Stream per_thread = CU_STREAM_PER_THREAD;
  EXPECT_FALSE(stream_key(per_thread) == key_on_other_thread(per_thread));
  EXPECT_TRUE(stream_key(per_thread) == stream_key(per_thread));
  const Stream a = reinterpret_cast<Stream>(0x1234), b = reinterpret_cast<Stream>(0x5678);
  EXPECT_TRUE(stream_key(a) == key_on_other_thread(a));  // one stream, whichever thread
  EXPECT_FALSE(stream_key(a) == stream_key(b));
  EXPECT_TRUE(stream_key(nullptr) == key_on_other_thread(nullptr));  // the legacy stream
}

// ---- the C API ----

ktune_moe_args c_args() {
  ktune_moe_args a;
  EXPECT_EQ(ktune_moe_args_init(&a), KTUNE_OK);
  return valid(a);
}

class MoeC : public ::testing::Test {
 protected:
  void SetUp() override {
    // The global runtime: an empty database of this test's, no shipped ones.
    setenv("KTUNE_CACHE_DIR", (dir_.path() / "cache").c_str(), 1);
    ASSERT_EQ(ktune_configure((dir_.path() / "user.db").c_str(), 0), KTUNE_OK);
  }
  void TearDown() override {
    ktune_configure(nullptr, 1);
    unsetenv("KTUNE_CACHE_DIR");
  }
  void expect_invalid(const ktune_moe_args* a, const std::string& part) {
    EXPECT_EQ(ktune_moe(a, nullptr), KTUNE_ERROR_INVALID_ARGUMENT) << part;
    EXPECT_CONTAINS(ktune_last_error(), part);
  }
  test::TempDir dir_;
};

TEST_F(MoeC, InitSetsTheDefaults) {
  ktune_moe_args a;
  std::memset(&a, 0x5a, sizeof a);
  ASSERT_EQ(ktune_moe_args_init(&a), KTUNE_OK);
  EXPECT_EQ(a.struct_size, sizeof a);
  EXPECT_EQ(a.x, nullptr);
  EXPECT_EQ(a.workspace, nullptr);
  EXPECT_EQ(a.workspace_bytes, 0u);
  EXPECT_EQ(a.t, 0);
  EXPECT_EQ(a.routing, KTUNE_MOE_SOFTMAX_RENORM);
  EXPECT_EQ(a.n_group, 1);
  EXPECT_EQ(a.topk_group, 1);
  EXPECT_EQ(a.routed_scaling, 1.0f);
  EXPECT_EQ(a.dtype, KTUNE_BF16);
  // The same defaults as the C++ struct.
  const MoeArgs cpp;
  EXPECT_EQ(static_cast<int>(cpp.routing), static_cast<int>(a.routing));
  EXPECT_EQ(static_cast<int>(cpp.dtype), static_cast<int>(a.dtype));
  EXPECT_EQ(ktune_moe_args_init(nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_moe_args_init: args is null");
}

TEST_F(MoeC, BadArgumentsAreNamed) {
  expect_invalid(nullptr, "ktune_moe: args is null");
  ktune_moe_args a = c_args();
  a.struct_size = 0;
  expect_invalid(&a, "ktune_moe: args->struct_size is 0, not " + std::to_string(sizeof a) +
                         " (initialise the struct with ktune_moe_args_init())");
  a.struct_size = sizeof a + 8;
  expect_invalid(&a, "(ktune.h is newer than this library)");

  a = c_args();
  const int nine = 9;
  std::memcpy(&a.dtype, &nine, sizeof a.dtype);  // what an FFI caller could pass
  expect_invalid(&a, "dtype 9 is not one of KTUNE_FP32 (0), KTUNE_FP16 (1), KTUNE_BF16 (2), "
                     "KTUNE_E4M3 (4)");
  a = c_args();
  a.dtype = KTUNE_FP32;
  expect_invalid(&a, "moe: dtype fp32 (0) is not supported (allowed: bf16, fp16, e4m3)");
  a = c_args();
  std::memcpy(&a.routing, &nine, sizeof a.routing);
  expect_invalid(&a, "moe: routing 9 is not one of softmax (0)");
  a = c_args();
  a.routing = KTUNE_MOE_PRECOMPUTED;
  a.logits = nullptr;
  a.topk_weights = at<float>(0x700000);
  expect_invalid(&a, "moe: topk_ids is null, but routing=precomputed needs it");
  a = c_args();
  a.routing = KTUNE_MOE_SIGMOID_GROUP;
  a.n_group = 3;
  expect_invalid(&a, "e=8 is not a multiple of n_group=3");
  a = c_args();
  a.w1 = at(0x300008);
  expect_invalid(&a, "moe: w1 at 0x300008 is not 16-byte aligned");

  a = c_args();
  EXPECT_EQ(ktune_moe_workspace_size(&a, nullptr), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_moe_workspace_size: bytes is null");
  std::size_t bytes = 7;
  EXPECT_EQ(ktune_moe_workspace_size(nullptr, &bytes), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_moe_workspace_size: args is null");
  a.k = 9;
  EXPECT_EQ(ktune_moe_workspace_size(&a, &bytes), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "k=9 exceeds e=8");
  EXPECT_EQ(bytes, 7u);
}

TEST_F(MoeC, ValidArgumentsReachTheDevice) {
  if (!no_gpu()) GTEST_SKIP() << "a GPU is here: fake addresses would be launched";
  ktune_moe_args a = c_args();
  EXPECT_EQ(ktune_moe(&a, nullptr), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
  std::size_t bytes = 0;
  EXPECT_EQ(ktune_moe_workspace_size(&a, &bytes), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
  // A caller built against the first ktune_moe_args passes its (possibly smaller) size.
  a.struct_size = offsetof(ktune_moe_args, workspace_bytes) + sizeof(size_t);
  EXPECT_EQ(ktune_moe(&a, nullptr), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
}

// A caller whose struct is the first version's (an older header, a ctypes binding) passes its
// sizeof to the _sized init: the plain init writes this header's sizeof, past the caller's.
TEST_F(MoeC, InitSizedWritesOnlyTheCallersBytes) {
  constexpr std::size_t first = offsetof(ktune_moe_args, workspace_bytes) + sizeof(size_t);
  constexpr std::size_t full = sizeof(ktune_moe_args);
  // The caller's struct, then guard bytes that no init may touch.
  alignas(ktune_moe_args) unsigned char buf[full + 64];
  std::memset(buf, 0xAB, sizeof buf);
  auto* raw = reinterpret_cast<ktune_moe_args*>(buf);
  const auto guard_intact = [&](std::size_t from) {
    for (std::size_t i = from; i < sizeof buf; ++i)
      if (buf[i] != 0xAB) return false;
    return true;
  };
  ASSERT_EQ(ktune_moe_args_init_sized(raw, first), KTUNE_OK) << ktune_last_error();
  EXPECT_TRUE(guard_intact(first));
  ktune_moe_args plain;
  ASSERT_EQ(ktune_moe_args_init(&plain), KTUNE_OK);
  // The bytes it wrote are the plain init's, struct_size apart.
  EXPECT_EQ(std::memcmp(buf + sizeof(size_t), reinterpret_cast<unsigned char*>(&plain) +
                        sizeof(size_t), first - sizeof(size_t)),
            0);
  // The caller's view: its bytes, then memory of its own that the library must never read.
  ktune_moe_args a;
  std::memset(static_cast<void*>(&a), 0xCD, sizeof a);
  std::memcpy(static_cast<void*>(&a), buf, first);
  EXPECT_EQ(a.struct_size, first);
  EXPECT_EQ(a.x, nullptr);
  EXPECT_EQ(a.t, 0);
  EXPECT_EQ(a.routing, KTUNE_MOE_SOFTMAX_RENORM);
  EXPECT_EQ(a.n_group, 1);
  EXPECT_EQ(a.topk_group, 1);
  EXPECT_EQ(a.routed_scaling, 1.0f);
  EXPECT_EQ(a.dtype, KTUNE_BF16);
  EXPECT_EQ(a.workspace, nullptr);
  EXPECT_EQ(a.workspace_bytes, 0u);

  // Sizes outside first..full are refused, and nothing is written.
  for (const std::size_t size : {std::size_t{0}, first - 1, full + 1, full + 64}) {
    std::memset(buf, 0xAB, sizeof buf);
    EXPECT_EQ(ktune_moe_args_init_sized(raw, size), KTUNE_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_CONTAINS(ktune_last_error(), "ktune_moe_args_init_sized: size is " +
                                            std::to_string(size) + ", not in " +
                                            std::to_string(first) + ".." +
                                            std::to_string(full));
    EXPECT_TRUE(guard_intact(0)) << size;
  }
  EXPECT_EQ(ktune_moe_args_init_sized(nullptr, first), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "ktune_moe_args_init_sized: args is null");
  // The full size is the plain init, byte for byte.
  std::memset(buf, 0x5A, sizeof buf);
  ASSERT_EQ(ktune_moe_args_init_sized(raw, full), KTUNE_OK);
  EXPECT_EQ(std::memcmp(buf, &plain, full), 0);
  EXPECT_EQ(buf[full], 0x5A);

  // The first-size struct goes through the checks as before.
  a = valid(a);
  ktune_moe_args bad = a;
  bad.k = 9;
  expect_invalid(&bad, "k=9 exceeds e=8");
  bad = a;
  bad.routing = KTUNE_MOE_SIGMOID_GROUP;
  bad.n_group = 3;
  expect_invalid(&bad, "e=8 is not a multiple of n_group=3");
  if (!no_gpu()) GTEST_SKIP() << "a GPU is here: fake addresses would be launched";
  EXPECT_EQ(ktune_moe(&a, nullptr), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
  std::size_t bytes = 0;
  EXPECT_EQ(ktune_moe_workspace_size(&a, &bytes), KTUNE_ERROR_NO_DEVICE) << ktune_last_error();
}

}  // namespace
}  // namespace ktune

// A plan key holds at most kMaxDims dims (and a call kMaxScalars scalars):
// every registered op must fit, or each of its calls fails with "too many dimensions" (the
// attention op outgrew 8 dims when its mask variants came, and only the GPU tests saw it).
TEST(PlanKey, EveryRegisteredOpFits) {
  for (const ktune::Op* op : ktune::all_ops()) {
    SCOPED_TRACE(std::string(op->name()));
    EXPECT_LE(op->dims().size(), ktune::kMaxDims);
    EXPECT_LE(op->scalars().size(), ktune::kMaxScalars);
  }
}
