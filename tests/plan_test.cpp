// Tuning plans without a GPU: parsing and its messages, shard slicing, --shard auto from the
// batch schedulers' variables, resume decisions against a database, the shipped plans, and the
// CLI through --dry-run.
#include "tuner/plan.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "templates/op.hpp"

namespace fs = std::filesystem;
using namespace ktune;

namespace {

Plan parse(const std::string& text) {
  std::istringstream in(text);
  return parse_plan(in, "test.plan");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string shard_error(const std::string& text, std::map<std::string, std::string> vars) {
  try {
    parse_shard(text, env_of(std::move(vars)));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("ktune-plan-test-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(Plan, ParsesLinesCommentsAndBuckets) {
  const Plan p = parse(
      "# a model\n"
      "\n"
      "add_rmsnorm bf16 m=16,n=4096   # trailing comment\n"
      "  flash_attention fp16 b=1,hq=32,hkv=8,nq=4096,nk=4096,d=128,causal=yes\n"
      "moe bf16 e=8,k=2,h=4096,i=14336 tokens=1,16,16,128\n"
      "moe bf16 e=8,k=2,h=4096,i=14336,t=64\n"
      "moe bf16 e=8,k=2,h=4096,i=14336\n");
  ASSERT_EQ(p.lines.size(), 5u);
  EXPECT_EQ(p.lines[0].line, 3u);
  EXPECT_EQ(p.lines[0].text, "add_rmsnorm bf16 m=16,n=4096");
  EXPECT_EQ(p.lines[0].problem_keys, std::vector<std::string>{"m=16,n=4096"});
  EXPECT_EQ(p.lines[1].dtype, DType::f16);
  EXPECT_NE(p.lines[1].problem_keys[0].find("causal=yes"), std::string::npos);
  // Duplicated buckets collapse, as in ktune sweep --tokens.
  EXPECT_EQ(p.lines[2].buckets, (std::vector<std::int64_t>{1, 16, 128}));
  EXPECT_EQ(p.lines[2].problem_keys.size(), 3u);
  EXPECT_NE(p.lines[2].problem_keys[1].find("t=16"), std::string::npos);
  EXPECT_TRUE(p.lines[3].buckets.empty());
  EXPECT_EQ(p.lines[3].problem_keys.size(), 1u);
  EXPECT_EQ(p.lines[4].buckets, get_op("moe").default_buckets());
  EXPECT_EQ(p.problems(), 1 + 1 + 3 + 1 + get_op("moe").default_buckets().size());
}

TEST(Plan, BadLinesNameFileLineTextAndWhatIsAllowed) {
  const std::string head = "add_rmsnorm bf16 m=16,n=4096\n# comment\n";
  struct Case {
    std::string line;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"rmsnorm bf16 m=1,n=2", {"unknown op", "known ops: add_rmsnorm"}},
      {"add_rmsnorm int8 m=1,n=2", {"unsupported dtype \"int8\"", "allowed: bf16, fp16, e4m3"}},
      {"add_rmsnorm bf16", {"expected OP DTYPE SHAPE"}},
      {"add_rmsnorm bf16 m=1,n=2 m=3", {"expected OP DTYPE SHAPE"}},
      {"add_rmsnorm bf16 m=1,n=0", {"n"}},
      {"add_rmsnorm bf16 m=1,n=2 tokens=1", {"tokens= applies to ops with token buckets"}},
      {"moe bf16 e=8,k=2,h=4096,i=14336 tokens=1,x", {"\"x\" is not an integer from 1"}},
      {"moe bf16 e=8,k=2,h=4096,i=14336,t=4 tokens=1", {"t"}},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(head + c.line + "\n");
    EXPECT_NE(e.find("plan \"test.plan\" line 3 \"" + c.line + "\": "), std::string::npos) << e;
    for (const std::string& x : c.expected) EXPECT_NE(e.find(x), std::string::npos) << e;
  }
  EXPECT_NE(error_of("# nothing\n\n").find("lists no problem"), std::string::npos);
  // Missing, a directory, a FIFO (which would block a reader): one message each, with why.
  const fs::path dir = temp_dir();
  const std::string fifo = (dir / "fifo").string();
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, expected] :
       {std::pair<std::string, std::string>{"/nonexistent/plan.txt",
                                            "cannot read the plan \"/nonexistent/plan.txt\": No "
                                            "such file or directory"},
        {dir.string(), "is a directory, not a regular file"},
        {fifo, "is a FIFO, not a regular file"}}) {
    try {
      load_plan(path);
      ADD_FAILURE() << "loaded " << path;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(Plan, ShardsAreDisjointCoveringAndStable) {
  std::string text;
  for (int m = 1; m <= 23; ++m) text += "add_rmsnorm bf16 m=" + std::to_string(m) + ",n=4096\n";
  const Plan p = parse(text);
  for (std::size_t n : {1u, 2u, 3u, 4u, 7u, 23u, 40u}) {
    std::multiset<std::size_t> seen;
    for (std::size_t i = 0; i < n; ++i) {
      const Plan s = shard_plan(p, {i, n});
      for (const PlanLine& l : s.lines) seen.insert(l.line);
      // Round robin by line: sizes differ by at most one; the same input gives the same slice.
      EXPECT_LE(s.lines.size(), (p.lines.size() + n - 1) / n);
      EXPECT_GE(s.lines.size(), p.lines.size() / n);
      const Plan again = shard_plan(p, {i, n});
      ASSERT_EQ(again.lines.size(), s.lines.size());
      for (std::size_t k = 0; k < s.lines.size(); ++k) EXPECT_EQ(again.lines[k].line, s.lines[k].line);
    }
    ASSERT_EQ(seen.size(), p.lines.size()) << n << " shards";
    for (const PlanLine& l : p.lines) EXPECT_EQ(seen.count(l.line), 1u) << n << " shards";
  }
  EXPECT_EQ(shard_plan(p, {1, 4}).lines.front().line, 2u);
}

TEST(Plan, ShardText) {
  const EnvLookup none = env_of({});
  const Shard s = parse_shard("2/5", none);
  EXPECT_EQ(s.index, 2u);
  EXPECT_EQ(s.count, 5u);
  for (const char* bad : {"5/5", "1/0", "-1/4", "1", "a/b", "1/4x", "/4", "0/100001", ""})
    EXPECT_NE(shard_error(bad, {}).find("expected I/N with 0 <= I < N"), std::string::npos) << bad;
}

TEST(Plan, ShardAutoFromEachFamily) {
  Shard s = parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 4u);
  // --array=1-4: ids from MIN.
  s = parse_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_MIN", "1"},
                                  {"SLURM_ARRAY_TASK_MAX", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.count, 4u);
  s = parse_shard("auto", env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(s.index, 0u);
  EXPECT_EQ(s.count, 2u);
  s = parse_shard("auto", env_of({{"PMI_RANK", "7"}, {"PMI_SIZE", "8"}}));
  EXPECT_EQ(s.index, 7u);
  EXPECT_EQ(s.count, 8u);
  // Slurm first, then Open MPI, then PMI.
  s = parse_shard("auto", env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"},
                                  {"OMPI_COMM_WORLD_SIZE", "3"}}));
  EXPECT_EQ(s.count, 3u);
}

TEST(Plan, ShardAutoErrors) {
  EXPECT_NE(shard_error("auto", {}).find("none of SLURM_ARRAY_TASK_ID"), std::string::npos);
  EXPECT_NE(shard_error("auto", {{"SLURM_ARRAY_TASK_ID", "1"}}).find("neither SLURM_ARRAY_TASK_COUNT"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}})
                .find("gives shard 4 of 4"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "4"}})
                .find("SLURM_ARRAY_TASK_ID=\"x\" is not an integer"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                 {"SLURM_ARRAY_TASK_MAX", "3"}})
                .find("is not within"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                 {"SLURM_ARRAY_TASK_MAX", "6"}, {"SLURM_ARRAY_TASK_COUNT", "4"}})
                .find("stepped or sparse"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"OMPI_COMM_WORLD_RANK", "1"}}).find("OMPI_COMM_WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}}).find("gives shard 2 of 2"),
            std::string::npos);
  EXPECT_NE(shard_error("auto", {{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}).find("PMI_SIZE=\"0\""),
            std::string::npos);
}

TEST(Plan, ResumeSkipsFinishedProblemsOnly) {
  const fs::path dir = temp_dir();
  const fs::path db = dir / "resume.db";
  fs::remove(db);
  const Plan p = parse(
      "add_rmsnorm bf16 m=16,n=4096\n"
      "add_rmsnorm bf16 m=32,n=4096\n"
      "add_rmsnorm fp16 m=16,n=4096\n"
      "swiglu bf16 m=16,n=14336\n"
      "moe bf16 e=8,k=2,h=4096,i=14336 tokens=1,2,4\n");
  const DeviceInfo device = *device_for_arch("sm_90a");
  const std::string other = "another-device";
  const Op& norm = get_op("add_rmsnorm");
  const Op& moe = get_op("moe");
  {
    Store s = Store::open(db, Store::Mode::read_write);
    s.upsert_device(device);
    const auto best = [&](const std::string& dev, const Op& op, DType t, const std::string& key,
                          const std::string& hash) {
      BestRecord b;
      b.device_key = dev;
      b.op = std::string(op.name());
      b.dtype = t;
      b.problem_key = key;
      b.params_key = op.params_key(op.default_params(op.parse_problem(key), t, device));
      b.template_hash = hash;
      b.median_us = 10;
      s.set_best(b);  // what a finished sweep writes last
    };
    best(device.key(), norm, DType::bf16, p.lines[0].problem_keys[0], norm.template_hash());
    best(device.key(), norm, DType::bf16, p.lines[1].problem_keys[0], "stale-template");
    best(other, norm, DType::f16, p.lines[2].problem_keys[0], norm.template_hash());
    best(device.key(), moe, DType::bf16, p.lines[4].problem_keys[1], moe.template_hash());
    // A sweep killed half way: its trial raised the best row, but the sweep never chose.
    SweepRecord sr;
    sr.device_key = device.key();
    sr.op = "swiglu";
    sr.problem_key = p.lines[3].problem_keys[0];
    sr.strategy = "exhaustive";
    TrialRecord t;
    t.sweep_id = s.begin_sweep(sr);
    t.device_key = device.key();
    t.op = "swiglu";
    t.dtype = DType::bf16;
    t.problem_key = sr.problem_key;
    const Op& swiglu = get_op("swiglu");
    t.params_key = swiglu.params_key(swiglu.default_params(swiglu.parse_problem(sr.problem_key),
                                                           DType::bf16, device));
    t.template_hash = swiglu.template_hash();
    t.median_us = t.min_us = t.max_us = 5;
    t.repetitions = 10;
    s.record_trial(t);
    ASSERT_TRUE(s.best(device.key(), "swiglu", DType::bf16, sr.problem_key, t.template_hash));
  }
  const Store s = Store::open(db, Store::Mode::read_only);
  const std::vector<PlanLineState> r = plan_resume(p, s, device.key(), false);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].done.size(), 1u);               // finished, current template
  EXPECT_TRUE(r[0].todo.problem_keys.empty());
  EXPECT_EQ(r[1].todo.problem_keys.size(), 1u);  // a stale template hash
  EXPECT_EQ(r[2].todo.problem_keys.size(), 1u);  // another device's row
  EXPECT_EQ(r[3].todo.problem_keys.size(), 1u);  // killed mid-sweep
  EXPECT_TRUE(r[3].done.empty());
  EXPECT_EQ(r[4].done, std::vector<std::string>{p.lines[4].problem_keys[1]});
  EXPECT_EQ(r[4].todo.buckets, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(r[4].todo.problem_keys.size(), 2u);
  for (const PlanLineState& f : plan_resume(p, s, device.key(), true)) EXPECT_TRUE(f.done.empty());
  EXPECT_EQ(plan_resume(p, s, other, false)[2].done.size(), 1u);
  fs::remove_all(dir);
}

TEST(Plan, EveryShippedPlanParses) {
  const fs::path plans = fs::path(KTUNE_SOURCE_DIR) / "plans";
  std::size_t files = 0;
  std::set<std::string> ops;
  for (const fs::directory_entry& e : fs::directory_iterator(plans)) {
    if (e.path().extension() != ".txt") continue;
    ++files;
    Plan p;
    ASSERT_NO_THROW(p = load_plan(e.path())) << e.path();
    EXPECT_GT(p.problems(), 0u) << e.path();
    for (const PlanLine& l : p.lines) ops.insert(l.op);
  }
  EXPECT_GE(files, 5u);
  for (const char* op : {"flash_attention", "flash_decode", "add_rmsnorm", "swiglu", "moe"})
    EXPECT_EQ(ops.count(op), 1u) << op << " is in no shipped plan";
}

namespace {

/// Runs the ktune binary; stdout and stderr together.
std::string run_cli(const std::string& args, int& status) {
  const std::string cmd = std::string(KTUNE_CLI_PATH) + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  status = WEXITSTATUS(pclose(f));
  return out;
}

}  // namespace

TEST(Plan, CliDryRun) {
  const fs::path dir = temp_dir();
  const fs::path plan = dir / "p.txt";
  std::ofstream(plan) << "add_rmsnorm bf16 m=16,n=4096\nadd_rmsnorm bf16 m=32,n=4096\n"
                         "swiglu bf16 m=16,n=14336\n";
  const std::string db = (dir / "dry.db").string();
  int st = 0;
  std::string out = run_cli("sweep --plan " + plan.string() + " --dry-run --db " + db, st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("3 problems on 3 lines; 3 to sweep"), std::string::npos) << out;
  EXPECT_NE(out.find("sweep  line 3    swiglu bf16 m=16,n=14336"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db));  // a dry run writes nothing
  {
    // A finished sweep of line 1 on a recorded device (this machine has no GPU: a dry run then
    // decides for the devices the database records).
    const DeviceInfo device = *device_for_arch("sm_90a");
    Store s = Store::open(db, Store::Mode::read_write);
    s.upsert_device(device);
    const Op& norm = get_op("add_rmsnorm");
    BestRecord b;
    b.device_key = device.key();
    b.op = "add_rmsnorm";
    b.problem_key = "m=16,n=4096";
    b.params_key = norm.params_key(norm.default_params(norm.parse_problem(b.problem_key),
                                                       DType::bf16, device));
    b.template_hash = norm.template_hash();
    b.median_us = 3;
    s.set_best(b);
  }
  out = run_cli("sweep --plan " + plan.string() + " --dry-run --db " + db, st);
  EXPECT_EQ(st, 0) << out;
  if (out.find("no GPU here") != std::string::npos) {
    EXPECT_NE(out.find("2 to sweep, 1 in the database"), std::string::npos) << out;
    EXPECT_NE(out.find("skip   line 1    add_rmsnorm bf16 m=16,n=4096 (in the database)"),
              std::string::npos) << out;
  }
  out = run_cli("sweep --plan " + plan.string() + " --dry-run --force --db " + db, st);
  EXPECT_NE(out.find("3 to sweep, 0 in the database"), std::string::npos) << out;
  fs::remove(db);
  out = run_cli("sweep --plan " + plan.string() + " --dry-run --shard 1/2 --db " + db, st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("shard 1/2"), std::string::npos) << out;
  EXPECT_NE(out.find("m=32,n=4096"), std::string::npos) << out;
  EXPECT_EQ(out.find("m=16,n=4096"), std::string::npos) << out;
  out = run_cli("sweep --plan " + plan.string() + " --dry-run --shard auto --db " + db, st);
  EXPECT_EQ(st, 2) << out;
  out = run_cli("sweep --plan " + plan.string() + " --op softmax --dry-run --db " + db, st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("leave out --op"), std::string::npos) << out;
  out = run_cli("sweep --dry-run --db " + db, st);
  EXPECT_NE(out.find("--dry-run applies to --plan FILE"), std::string::npos) << out;
  fs::remove_all(dir);
}

// --strategy is checked against each plan line's op, not against --op's default (which --plan
// leaves out): a plan of MoE lines takes the staged strategy, and a plan where one line's op has
// no stages is refused naming that line.
TEST(Plan, CliStrategyIsCheckedPerLine) {
  const fs::path dir = temp_dir();
  const fs::path moe = dir / "moe.txt";
  std::ofstream(moe) << "moe bf16 e=8,k=2,h=4096,i=14336,t=16\n";
  const std::string db = (dir / "dry.db").string();
  int st = 0;
  std::string out =
      run_cli("sweep --plan " + moe.string() + " --strategy staged --dry-run --db " + db, st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("sweep  line 1    moe bf16"), std::string::npos) << out;
  const fs::path mixed = dir / "mixed.txt";
  std::ofstream(mixed) << "moe bf16 e=8,k=2,h=4096,i=14336,t=16\nswiglu bf16 m=16,n=14336\n";
  out = run_cli("sweep --plan " + mixed.string() + " --strategy staged --dry-run --db " + db, st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("line 2: strategy staged: op swiglu declares no search stages"),
            std::string::npos) << out;
  out = run_cli("sweep --plan " + mixed.string() + " --dry-run --db " + db, st);
  EXPECT_EQ(st, 0) << out;  // each op's own strategy
  EXPECT_FALSE(fs::exists(db));
  fs::remove_all(dir);
}
