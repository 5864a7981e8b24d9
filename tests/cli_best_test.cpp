// `ktune best` without a GPU (--device, --arch), and never silent about a database it cannot use;
// `ktune best --plan` over a plan's problems, and the shipped databases' coverage of the shipped
// plans (every problem of plans/*.txt dispatches `exact` on the GPU each database was built on).
#include <fstream>

#include "db/sqlite.hpp"
#include "templates/op.hpp"
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

// Not m=64,n=4096's default (a row that is its problem's default serves no neighbour).
const char* kParams = "threads=128,rows=1,vec=8,regs=1";

class Best : public Cli {
 protected:
  DeviceInfo h100;

  Best() {
    h100 = *device_for_arch("sm_90a");
    h100.name = "NVIDIA H100 80GB HBM3";
    h100.memory_bytes = 81079LL << 20;
  }

  // A database where add_rmsnorm m=64,n=4096 is tuned on `h100` with the kernels built in, and
  // its default timed beside it, 2.5x slower (so that the row serves neighbours, judged).
  fs::path tuned_db(const std::string& name = "tuned.db") {
    const fs::path db = dir.path() / name;
    Store s = Store::open(db, Store::Mode::read_write);
    s.upsert_device(h100);
    TrialRecord t;
    t.device_key = h100.key();
    t.op = "add_rmsnorm";
    t.problem_key = "m=64,n=4096";
    t.params_key = kParams;
    t.template_hash = get_op("add_rmsnorm").template_hash();
    t.median_us = 3.25;
    s.record_trial(t);
    const Op& op = get_op("add_rmsnorm");
    t.params_key =
        op.params_key(op.default_params(op.parse_problem("m=64,n=4096"), DType::bf16, h100));
    t.median_us = 8.125;
    s.record_trial(t);
    return db;
  }
};

TEST_F(Best, AnswersForARecordedDeviceWithoutAGpu) {
  tuned_db();
  for (const std::string& device : {h100.name, h100.key()}) {
    CliRun r = ktune("best --op add_rmsnorm --shape m=64,n=4096 --no-shipped --db tuned.db --device '" +
                     device + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, std::string("add_rmsnorm bf16 m=64,n=4096: ") + kParams)) << r.out;
    EXPECT_TRUE(contains(r.out, "match: exact")) << r.out;
    EXPECT_TRUE(contains(r.out, "3.25 us")) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  CliRun near = ktune("best --op add_rmsnorm --shape m=128,n=4096 --no-shipped --db tuned.db --json "
                      "--device '" + h100.name + "'");
  EXPECT_EQ(near.code, 0) << near.err;
  EXPECT_TRUE(contains(near.out, "\"match\":\"nearest_shape\"")) << near.out;
  EXPECT_TRUE(contains(near.out, "\"device\":\"NVIDIA H100 80GB HBM3\"")) << near.out;
  CliRun unknown = ktune("best --op add_rmsnorm --no-shipped --db tuned.db --device 'NVIDIA B200'");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(contains(unknown.err, "--device \"NVIDIA B200\" is recorded in none of the databases"))
      << unknown.err;
}

TEST_F(Best, AnswersForAGenericArch) {
  tuned_db();
  CliRun r = ktune("best --op add_rmsnorm --shape m=64,n=4096 --no-shipped --db tuned.db --arch sm_90a");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "match: other_device")) << r.out;
  CliRun a100 = ktune("best --op add_rmsnorm --shape m=64,n=4096 --no-shipped --db tuned.db --arch sm_80");
  EXPECT_EQ(a100.code, 0) << a100.err;
  EXPECT_TRUE(contains(a100.out, "match: default")) << a100.out;
  CliRun both = ktune("best --op add_rmsnorm --arch sm_80 --device x");
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(contains(both.err, "--device and --arch exclude each other")) << both.err;
  CliRun bad = ktune("best --op add_rmsnorm --arch sm_42");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "unknown arch \"sm_42\" (allowed: sm_90a, sm_80)")) << bad.err;
}

TEST_F(Best, ARefusedDatabaseNamedWithDbIsAnError) {
  { std::ofstream(dir.path() / "junk.db") << std::string(8192, 'j'); }
  fs::create_directory(dir.path() / "adir.db");
  for (const char* db : {"junk.db", "adir.db"}) {
    CliRun r = ktune(std::string("best --op add_rmsnorm --arch sm_90a --no-shipped --db ") + db);
    EXPECT_EQ(r.code, 4) << db << "\n" << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "database \"" + std::string(db) + "\" cannot be used: ")) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_FALSE(contains(r.out, "match: default")) << r.out;
  }
  // Without --arch or --device (the runtime, which needs a GPU for the answer): the refusal
  // comes first, so it needs none.
  CliRun runtime = ktune("best --op add_rmsnorm --no-shipped --db junk.db");
  EXPECT_EQ(runtime.code, 4) << runtime.err;
  EXPECT_TRUE(contains(runtime.err, "database \"junk.db\" cannot be used: ")) << runtime.err;
}

TEST_F(Best, OtherDatabasesItCannotUseAreWarnings) {
  tuned_db();
  { std::ofstream(dir.path() / "junk.db") << std::string(8192, 'j'); }
  CliRun shipped = ktune("best --op add_rmsnorm --shape m=64,n=4096 --db tuned.db --device '" + h100.name + "'",
                         "KTUNE_DB_PATH=" + (dir.path() / "junk.db").string());
  EXPECT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_TRUE(contains(shipped.out, "match: exact")) << shipped.out;
  EXPECT_TRUE(contains(shipped.err, "warning: database \"" + (dir.path() / "junk.db").string() +
                                        "\" is not used: "))
      << shipped.err;
  EXPECT_EQ(lines(shipped.err), 1u) << shipped.err;

  CliRun missing = ktune("best --op add_rmsnorm --arch sm_90a --no-shipped --db nowhere.db");
  EXPECT_EQ(missing.code, 0) << missing.err;
  EXPECT_TRUE(contains(missing.err, "warning: database \"nowhere.db\" does not exist")) << missing.err;
  EXPECT_FALSE(fs::exists(dir.path() / "nowhere.db"));
}

TEST_F(Best, SkippedRowsAreWarnings) {
  const fs::path db = tuned_db();
  {
    // A second best row with a negative timing: skipped alone by the readers.
    db::Connection c(db, db::OpenMode::read_write_create);
    c.exec("INSERT INTO best (device_key, op, dtype, problem_key, template_hash, params_key, "
            "median_us, trial_id, updated_at) SELECT device_key, op, dtype, 'm=128,n=4096', "
            "template_hash, params_key, -1, NULL, updated_at FROM best");
  }
  CliRun r = ktune("best --op add_rmsnorm --shape m=96,n=4096 --no-shipped --db tuned.db --device '" +
                   h100.name + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "match: nearest_shape (tuned on m=64,n=4096")) << r.out;
  EXPECT_TRUE(contains(r.err, "warning: database \"tuned.db\": 1 rows skipped (first: ")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  CliRun list = ktune("db list --db tuned.db");
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(contains(list.err, "warning: 1 rows of \"tuned.db\" skipped")) << list.err;
  EXPECT_TRUE(contains(list.out, kParams)) << list.out;
}

TEST_F(Best, PlanAnswersForEveryProblemAndCountsTheMatches) {
  tuned_db();
  std::ofstream(dir.path() / "p.txt") << "# three problems, one tuned\n"
                                         "add_rmsnorm bf16 m=64,n=4096\n"
                                         "add_rmsnorm bf16 m=64,n=8192  # a neighbour\n"
                                         "add_rmsnorm fp16 m=64,n=4096  # another dtype\n";
  const std::string common =
      "best --plan p.txt --no-shipped --db tuned.db --device '" + h100.name + "'";
  CliRun r = ktune(common);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "exact          add_rmsnorm      bf16   m=64,n=4096\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "nearest_shape  add_rmsnorm      bf16   m=64,n=8192\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "default        add_rmsnorm      fp16   m=64,n=4096\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "for NVIDIA H100 80GB HBM3 (sm_90a): 3 problems: 1 exact, 1 "
                              "nearest_shape, 0 other_device, 1 default")) << r.out;
  CliRun strict = ktune(common + " --require-exact");
  EXPECT_EQ(strict.code, 1);
  EXPECT_TRUE(contains(strict.err, "2 of 3 problems of p.txt are not tuned for NVIDIA H100"))
      << strict.err;
  CliRun json = ktune(common + " --json");
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_TRUE(contains(json.out, "\"counts\":{\"exact\":1,\"nearest_shape\":1,\"other_device\":0,"
                                 "\"default\":1}")) << json.out;
  std::ofstream(dir.path() / "one.txt") << "add_rmsnorm bf16 m=64,n=4096\n";
  EXPECT_EQ(ktune("best --plan one.txt --no-shipped --db tuned.db --require-exact --device '" +
                  h100.name + "'").code, 0);
}

TEST_F(Best, PlanOptionsThatCannotGoTogetherAreRefused) {
  std::ofstream(dir.path() / "p.txt") << "add_rmsnorm bf16 m=64,n=4096\n";
  for (const char* args :
       {"best --plan p.txt --op add_rmsnorm", "best --plan p.txt --shape m=1,n=2",
        "best --plan p.txt --dtype fp16", "best --op add_rmsnorm --require-exact", "best"}) {
    CliRun r = ktune(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(lines(r.err), 1u) << args << ": " << r.err;
  }
  std::ofstream(dir.path() / "bad.txt") << "add_rmsnorm bf16 m=64,n=4096\nno_such_op bf16 m=1\n";
  CliRun bad = ktune("best --plan bad.txt --arch sm_90a --no-shipped");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "bad.txt")) << bad.err;
  EXPECT_TRUE(contains(bad.err, "no_such_op")) << bad.err;
}

// A fresh install of a GPU a shipped database was built for dispatches every problem of the
// shipped plans from that database alone: `exact`, never a neighbour or a default.
TEST_F(Best, ShippedDatabasesCoverEveryShippedPlanOnTheirGpu) {
  const fs::path source = KTUNE_SOURCE_DIR;
  // The GPUs whose shipped database is built from the plans (scripts/build_shipped_db.sh);
  // h100.db holds the ANCHORS attention rows and the two benchmark MoE layers
  // (db/shipped/README.md; H100ShipsTheBenchmarkMoeLayersEveryBucket).
  for (const std::string device : {"NVIDIA H200"}) {
    for (const auto& plan : fs::directory_iterator(source / "plans")) {
      CliRun r = ktune("best --plan '" + plan.path().string() + "' --require-exact --db none.db "
                       "--device '" + device + "'");
      EXPECT_EQ(r.code, 0) << plan.path() << " on " << device << ":\n" << r.out << r.err;
      EXPECT_TRUE(contains(r.out, " problems: ")) << r.out;
    }
  }
}

// h100.db's MoE rows (swept on the H100 on 2026-12-05, stop 63): both layers of
// benchmarks/run_moe.sh at every bucket swept dispatch `exact` on the H100 from the shipped
// database alone; a change of the MoE kernels that leaves them stale fails here until they
// are re-hashed (scripts/same_machine_code.py) or re-tuned. Mixtral's line (all 13 buckets) is
// the Mixtral plan's own; the DeepSeek-like layer is in no plan.
TEST_F(Best, H100ShipsTheBenchmarkMoeLayersEveryBucket) {
  std::ifstream mixtral(fs::path(KTUNE_SOURCE_DIR) / "plans" / "mixtral-8x7b.txt");
  std::ofstream plan(dir.path() / "moe-h100.txt");
  for (std::string line; std::getline(mixtral, line);)
    if (line.rfind("moe ", 0) == 0) plan << line << "\n";
  plan << "moe bf16 e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4 "
          "tokens=1,16,32,64,128,256,512,1024,2048,4096\n";
  plan.close();
  CliRun r = ktune("best --plan moe-h100.txt --require-exact --db none.db "
                   "--device 'NVIDIA H100 80GB HBM3'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "23 problems: ")) << r.out;
}

// The lookup lets a tuned row serve its neighbours only where it beat the built-in default there
// by kNeighbourMinGain, read from the default's trial beside the row; with no such trial the row
// serves. So a shipped database that holds trials must hold, for every current best row, a trial
// of the default as it is now on that row's device: a change of the defaults (or of a device's
// fingerprint, e.g. its memory bandwidth) that is not re-timed there fails here.
TEST(ShippedDatabases, HoldATrialOfTheCurrentDefaultBesideEachBestRow) {
  const fs::path source = KTUNE_SOURCE_DIR;
  for (const auto& file : fs::directory_iterator(source / "db" / "shipped")) {
    if (file.path().extension() != ".db") continue;
    const Store store = Store::open(file.path(), Store::Mode::read_only);
    // A file of best rows alone (no trial) would leave every neighbour unjudged alike; both
    // shipped files hold trials. `ktune db defaults --check` is the same check for any file.
    if (store.all_trials().rows.empty()) continue;
    int checked = 0;
    for (const BestRecord& b : store.all_bests().rows) {
      const Op* op = find_op(b.op);
      ASSERT_NE(op, nullptr) << b.op;
      if (b.template_hash != op->template_hash()) continue;  // stale: the lookup skips it
      const std::optional<DeviceInfo> device = store.device(b.device_key);
      ASSERT_TRUE(device) << file.path() << ": " << b.device_key;
      const std::string wanted =
          op->params_key(op->default_params(op->parse_problem(b.problem_key), b.dtype, *device));
      bool found = wanted == b.params_key;
      for (const TrialRecord& t :
           store.trials(b.device_key, b.op, b.dtype, b.problem_key, b.template_hash).rows)
        found = found || (t.params_key == wanted && t.status == TrialStatus::ok);
      EXPECT_TRUE(found) << file.path().filename() << ": " << b.op << " " << dtype_name(b.dtype)
                         << " " << b.problem_key << " has no trial of the default " << wanted;
      ++checked;
    }
    EXPECT_GT(checked, 0) << file.path();
  }
}

// What `ktune db check` reports, no other command lists, merges or ships (review of stop 77):
// a row of the current kernel code outside the op's space, and a row whose trial is of another
// configuration (its timing is not its own).
TEST_F(Best, RowsCheckReportsAreNeitherListedNorMergedNorShipped) {
  const fs::path db = tuned_db();
  {
    Store s = Store::open(db, Store::Mode::read_write);
    TrialRecord t;
    t.device_key = h100.key();
    t.op = "add_rmsnorm";
    t.problem_key = "m=128,n=4096";
    t.params_key = "threads=3,rows=1,vec=8,regs=1";  // 3 threads: no value of the tunable
    t.template_hash = get_op("add_rmsnorm").template_hash();
    t.median_us = 1.5;
    s.record_trial(t);
  }
  {
    db::Connection c(db, db::OpenMode::read_write_create);
    c.exec("UPDATE best SET params_key = 'threads=256,rows=1,vec=8,regs=1' "
           "WHERE problem_key = 'm=64,n=4096'");
  }
  CliRun check = ktune("db check --db tuned.db");
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_TRUE(contains(check.out, "threads=3")) << check.out;
  EXPECT_TRUE(contains(check.out, "is of another configuration")) << check.out;

  CliRun list = ktune("db list --db tuned.db");
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(contains(list.err, "warning: 1 rows of \"tuned.db\" skipped (first: best row "))
      << list.err;
  EXPECT_FALSE(contains(list.out, "threads=3")) << list.out;

  CliRun merge = ktune("db merge merged.db tuned.db");
  EXPECT_EQ(merge.code, 0) << merge.err;
  EXPECT_TRUE(contains(merge.err, "rows of \"tuned.db\" skipped")) << merge.err;
  EXPECT_TRUE(contains(merge.out, "0 best configurations")) << merge.out;
  CliRun merged = ktune("db check --db merged.db");
  EXPECT_EQ(merged.code, 0) << merged.out;

  CliRun ship = ktune("db ship tuned.db shipped.db");
  EXPECT_EQ(ship.code, 0) << ship.err;
  EXPECT_TRUE(contains(ship.err, "2 best rows no lookup can use were left out")) << ship.err;
  CliRun shipped = ktune("db check --db shipped.db");
  EXPECT_EQ(shipped.code, 0) << shipped.out;
}

// A best row timed at 0 us: nothing measures that, the readers skip it, and merging it with a
// real row never lets it win.
TEST_F(Best, AZeroTimeNeverWins) {
  const fs::path db = tuned_db();
  fs::copy_file(db, dir.path() / "zero.db");
  {
    db::Connection c(dir.path() / "zero.db", db::OpenMode::read_write_create);
    c.exec("UPDATE best SET median_us = 0");
  }
  CliRun check = ktune("db check --db zero.db");
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_TRUE(contains(check.out, "median_us is 0, expected a measured time > 0")) << check.out;
  ASSERT_EQ(ktune("db merge m.db tuned.db zero.db").code, 0);
  CliRun list = ktune("db list --db m.db");
  EXPECT_TRUE(contains(list.out, "3.25")) << list.out;
}

// A problem no configuration runs (e4m3 at a head dim its kernel does not take, or on sm_80):
// the answer, then one message and status 2, as for a bad shape.
TEST_F(Best, AProblemNothingRunsIsAnError) {
  for (const std::string& args :
       {std::string("--op flash_attention --dtype e4m3 --shape b=1,hq=8,hkv=8,nq=64,nk=64,d=64 "
                    "--arch sm_90a"),
        std::string("--op flash_attention --dtype e4m3 --shape b=1,hq=8,hkv=8,nq=64,nk=64,d=128 "
                    "--arch sm_80")}) {
    for (const std::string& json : {std::string(""), std::string(" --json")}) {
      CliRun r = ktune("best --no-shipped --db none.db " + args + json);
      EXPECT_EQ(r.code, 2) << args << json;
      EXPECT_TRUE(contains(r.err, "ktune best: no configuration of flash_attention runs ")) << r.err;
      EXPECT_TRUE(contains(r.out, json.empty() ? "match: default" : "\"cannot_run\":")) << r.out;
    }
  }
  CliRun ok = ktune("best --no-shipped --db none.db --op flash_attention --dtype e4m3 --shape "
                    "b=1,hq=8,hkv=8,nq=64,nk=64,d=128 --arch sm_90a");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST_F(Best, DeviceNamesIgnoreCaseAndBlanksAndAnUnknownOneListsThem) {
  tuned_db();
  CliRun r = ktune("best --op add_rmsnorm --shape m=64,n=4096 --no-shipped --db tuned.db "
                   "--device ' nvidia h100 80gb hbm3 '");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "match: exact")) << r.out;
  r = ktune("best --op add_rmsnorm --no-shipped --db tuned.db --device 'NVIDIA H300'");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "(recorded: \"NVIDIA H100 80GB HBM3\";")) << r.err;
}

TEST_F(Best, DbCommandsRefuseAnUnknownOpAndExportNeverReplacesADatabase) {
  tuned_db();
  for (const char* cmd : {"db list", "db show", "db export"}) {
    CliRun r = ktune(std::string(cmd) + " --db tuned.db --op nope");
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_TRUE(contains(r.err, "unknown op \"nope\" (known ops: ")) << cmd << r.err;
  }
  tuned_db("other.db");
  const std::string before = slurp(dir.path() / "other.db");
  CliRun r = ktune("db export --db tuned.db -o other.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "is an SQLite database; refusing to replace it")) << r.err;
  EXPECT_EQ(slurp(dir.path() / "other.db"), before);
}

// A file in $KTUNE_DB_PATH that is no database is skipped with its reason, as lookups skip it;
// the other databases are still listed.
TEST_F(Best, ShippedListingSkipsAFileLookupsWouldSkip) {
  tuned_db();
  std::ofstream(dir.path() / "junk.db") << "not a database, just text long enough to be read\n";
  CliRun r = ktune("db list --shipped", "KTUNE_DB_PATH='" + (dir.path() / "junk.db").string() +
                                            ":" + (dir.path() / "tuned.db").string() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "junk.db\" is not used: ")) << r.err;
  EXPECT_TRUE(contains(r.out, kParams)) << r.out;
  // A mistyped entry is said, not dropped.
  CliRun best = ktune("best --op add_rmsnorm --arch sm_90a",
                      "KTUNE_DB_PATH='" + (dir.path() / "tunde.db").string() + "'");
  EXPECT_EQ(best.code, 0) << best.err;
  EXPECT_TRUE(contains(best.err, "tunde.db\" is not used: no such file")) << best.err;
}

}  // namespace
}  // namespace ktune
