// `ktune db merge` and `ktune db diff` as a user runs them: summaries, exit codes, the diff's text
// and JSON, and one message per bad input with the output left alone.
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

class DbMergeCli : public Cli {
 protected:
  // An ok add_rmsnorm trial on make_db's device, of make_db's kernel code ("h").
  static TrialRecord trial(const std::string& problem, const std::string& params, double median) {
    TrialRecord t;
    t.device_key = device_for_arch("sm_90a")->key();
    t.op = "add_rmsnorm";
    t.problem_key = problem;
    t.params_key = params;
    t.template_hash = "h";
    t.median_us = median;
    return t;
  }

  // make_db's database (m=64,n=4096 at 12.5 us) with one more trial of `params` at `median`.
  fs::path shard(const std::string& name, const std::string& params, double median) {
    const fs::path db = make_db(name);
    Store s = Store::open(db, Store::Mode::read_write);
    TrialRecord t = trial("m=64,n=4096", params, median);
    s.record_trial(t);
    t.problem_key = "m=128,n=4096";
    s.record_trial(t);
    return db;
  }
};

TEST_F(DbMergeCli, MergesThenMergingAgainAddsNothing) {
  shard("a.db", "threads=128,rows=1,vec=8,regs=1", 10.0);
  CliRun r = ktune("db merge out.db a.db");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "merged 1 database into out.db (created): 1 devices, 1 sweeps, "
                              "4 trials (4 new), 2 best configurations (2 new or changed)"))
      << r.out;
  r = ktune("db merge out.db a.db --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"trials_added\":0")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"best_changed\":0")) << r.out;
  EXPECT_EQ(ktune("db check --db out.db").code, 0);
}

TEST_F(DbMergeCli, DiffSaysWhatChangedWithTheSpeedup) {
  shard("a.db", "threads=128,rows=1,vec=8,regs=1", 10.0);
  const fs::path b = shard("b.db", "threads=512,rows=1,vec=8,regs=1", 8.0);
  {
    Store s = Store::open(b, Store::Mode::read_write);
    s.record_trial(trial("m=256,n=4096", "threads=64,rows=1,vec=8,regs=1", 30.0));
  }
  ASSERT_EQ(ktune("db merge out.db a.db b.db").code, 0);
  CliRun r = ktune("db diff a.db out.db");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "threads=128,rows=1,vec=8,regs=1")) << r.out;
  EXPECT_TRUE(contains(r.out, "1.25x")) << r.out;
  EXPECT_TRUE(contains(r.out, "1 added, 0 removed, 2 changed, 0 unchanged")) << r.out;
  r = ktune("db diff out.db a.db --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"change\":\"removed\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"speedup\":0.8")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"new\":null")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"added\":0,\"removed\":1,\"changed\":2,\"unchanged\":0")) << r.out;
}

TEST_F(DbMergeCli, BadInputsOneMessageEachAndOutUntouched) {
  shard("a.db", "threads=128,rows=1,vec=8,regs=1", 10.0);
  ASSERT_EQ(ktune("db merge out.db a.db").code, 0);
  const std::string before = slurp(dir.path() / "out.db");
  std::ofstream(dir.path() / "notes.txt") << "some text, not a database, long enough to read\n";
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {"db merge out.db missing.db", 2,
       "input \"missing.db\" does not exist (expected an existing ktune database)"},
      {"db merge out.db a.db out.db", 2, "input \"out.db\" is the output \"out.db\""},
      {"db merge out.db notes.txt", 4, "notes.txt: file is not a database"},
      {"db merge out.db", 2, "db merge takes OUT and at least one IN, got 1 path"},
      {"db diff a.db", 2, "db diff takes two databases, A and B, got 1 path"},
      {"db diff a.db missing.db", 2, "\"missing.db\" does not exist"},
  };
  for (const Case& c : cases) {
    const CliRun r = ktune(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << c.args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_EQ(slurp(dir.path() / "out.db"), before) << c.args;
  }
}

// A copy of a database taken while a sweep wrote it (its -wal file beside it): every reader
// refuses it and names `ktune db recover`, which applies the log without a GPU.
TEST_F(DbMergeCli, RecoverAppliesTheLogAStoppedSweepLeft) {
  const fs::path db = make_db("live.db");
  {
    Store s = Store::open(db, Store::Mode::read_write);
    s.record_trial(trial("m=512,n=4096", "threads=64,rows=1,vec=8,regs=1", 7.0));
    fs::path wal = db;
    wal += "-wal";
    ASSERT_TRUE(fs::exists(wal));
    fs::copy_file(db, dir.path() / "copy.db");
    fs::copy_file(wal, dir.path() / "copy.db-wal");
  }
  CliRun list = ktune("db list --db copy.db");
  EXPECT_NE(list.code, 0);
  EXPECT_TRUE(contains(list.err, "`ktune db recover --db ")) << list.err;
  CliRun r = ktune("db recover --db copy.db");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "copy.db: ok, its write-ahead log is in the main file (2 best "
                              "configurations)")) << r.out;
  EXPECT_FALSE(fs::exists(dir.path() / "copy.db-wal"));
  list = ktune("db list --db copy.db");
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(contains(list.out, "m=512,n=4096")) << list.out;
  EXPECT_EQ(ktune("db recover --db missing.db").code, 4);
}

// An output its owner made read-only is left alone, whoever runs the merge (root could replace
// it): one message naming the mode.
TEST_F(DbMergeCli, AReadOnlyOutputIsNotReplaced) {
  shard("a.db", "threads=128,rows=1,vec=8,regs=1", 10.0);
  ASSERT_EQ(ktune("db merge out.db a.db").code, 0);
  fs::permissions(dir.path() / "out.db", fs::perms::owner_read | fs::perms::group_read |
                                             fs::perms::others_read);
  const std::string before = slurp(dir.path() / "out.db");
  CliRun r = ktune("db merge out.db a.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "output \"out.db\" is read-only (mode 0444)")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(slurp(dir.path() / "out.db"), before);
}

}  // namespace
}  // namespace ktune
