// The ktune command, run as a user would: exit codes, messages, and nothing written on bad input.
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

using test::Cli;
using test::CliRun;

TEST_F(Cli, HelpListsEveryCommand) {
  CliRun r = ktune("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"devices", "ops", "space", "sweep", "best", "db"})
    EXPECT_NE(r.out.find(c), std::string::npos) << c;
  CliRun s = ktune("sweep --help");
  EXPECT_EQ(s.code, 0);
  for (const char* o : {"--op", "--shape", "--dtype", "--strategy", "--budget", "--time-limit", "--jobs",
                        "--db", "--force", "--json"})
    EXPECT_NE(s.out.find(o), std::string::npos) << o;
}

TEST_F(Cli, OpsListsTheFusedFamily) {
  CliRun r = ktune("ops");
  EXPECT_EQ(r.code, 0);
  for (const char* op : {"add_rmsnorm", "layernorm", "bias_act", "swiglu", "softmax"})
    EXPECT_NE(r.out.find(op), std::string::npos) << op;
  CliRun j = ktune("ops --json");
  EXPECT_EQ(j.code, 0);
  EXPECT_EQ(j.out.front(), '[');
}

TEST_F(Cli, SpaceWorksWithoutAGpu) {
  CliRun r = ktune("space --op add_rmsnorm --shape m=16384,n=4095 --arch sm_80");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("valid"), std::string::npos);
  EXPECT_NE(r.out.find("invalid"), std::string::npos);
  CliRun j = ktune("space --op softmax --shape 64x1024 --json");
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_NE(j.out.find("\"valid\":"), std::string::npos);
}

TEST_F(Cli, SpaceCompileReportsResources) {
  CliRun r = ktune("space --op swiglu --shape m=64,n=4096 --arch sm_90a --compile --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"registers\":"), std::string::npos);
  EXPECT_EQ(r.out.find("compile_error"), std::string::npos);
}

TEST_F(Cli, BadInputGetsOneClearMessageAndWritesNothing) {
  const std::string db = (dir.path() / "t.db").string();
  struct Case {
    std::string args;
    std::string expect;  // in the message
  } cases[] = {
      {"sweep --op nope --db " + db, "unknown op \"nope\""},
      {"sweep --op add_rmsnorm --shape m=abc,n=4 --db " + db, "abc"},
      {"sweep --op add_rmsnorm --shape m=16,n=0 --db " + db, "n=0"},
      {"sweep --op add_rmsnorm --shape m=16,q=4 --db " + db, "q"},
      {"sweep --op add_rmsnorm --dtype int8 --db " + db, "int8"},
      {"sweep --op add_rmsnorm --strategy bayes --db " + db, "bayes"},
      {"sweep --op add_rmsnorm --db " + (dir.path() / "no/such/dir/t.db").string(), "does not exist"},
      {"sweep --op add_rmsnorm --budget -3 --db " + db, "-3"},
      {"sweep --op add_rmsnorm --bogus --db " + db, "bogus"},
      {"space --op add_rmsnorm --arch sm_42", "sm_42"},
      {"best --op nope", "unknown op"},
      {"db frobnicate --db " + db, "frobnicate"},
      {"db export --format xml --db " + db, "xml"},
      {"frobnicate", "unknown command"},
  };
  for (const Case& c : cases) {
    CliRun r = ktune(c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(db)) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "data")) << "nothing created in the data directory";
}

TEST_F(Cli, WithoutAGpuSweepSaysSoAndWritesNothing) {
  if (test::gpu_missing_reason().empty()) GTEST_SKIP() << "a GPU is present";
  const std::string db = (dir.path() / "t.db").string();
  CliRun r = ktune("sweep --op add_rmsnorm --shape m=64,n=4096 --db " + db);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  CliRun d = ktune("devices");
  EXPECT_EQ(d.code, 0);
  EXPECT_NE(d.out.find("no CUDA device found"), std::string::npos) << d.out;
  CliRun j = ktune("devices --json");
  EXPECT_NE(j.out.find("\"devices\":[]"), std::string::npos) << j.out;
}

TEST_F(Cli, DbListShowExport) {
  const std::filesystem::path db = make_db();
  CliRun list = ktune("db list --db " + db.string());
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("threads=256,rows=1,vec=8,regs=1"), std::string::npos) << list.out;
  CliRun lj = ktune("db list --json --db " + db.string());
  EXPECT_EQ(lj.code, 0) << lj.err;
  EXPECT_NE(lj.out.find("\"params\":\"threads=256,rows=1,vec=8,regs=1\""), std::string::npos) << lj.out;
  CliRun show = ktune("db show --status invalid --db " + db.string());
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("a reason"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("threads=256,rows=1"), std::string::npos) << "filtered by status";
  CliRun csv = ktune("db export --format csv --db " + db.string());
  EXPECT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(lines(csv.out), 3u) << csv.out;  // header + two trials
  std::filesystem::path out = dir.path() / "trials.json";
  CliRun js = ktune("db export --format json -o " + out.string() + " --db " + db.string());
  EXPECT_EQ(js.code, 0) << js.err;
  std::string text = slurp(out);
  EXPECT_NE(text.find("\"invalid\""), std::string::npos) << text;
  EXPECT_NE(text.find("12.5"), std::string::npos) << text;
  EXPECT_NE(text.find("\\\"quotes\\\""), std::string::npos) << text;
}

TEST_F(Cli, DbCommandsOnAMissingDatabase) {
  CliRun r = ktune("db list --db " + (dir.path() / "none.db").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "none.db"));
  // No database of the user's yet: the message points at the shipped ones.
  CliRun u = ktune("db list");
  EXPECT_NE(u.code, 0);
  EXPECT_NE(u.err.find("ktune db list --shipped"), std::string::npos) << u.err;
  EXPECT_EQ(lines(u.err), 1u) << u.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "data")) << "nothing created";
}

TEST_F(Cli, DbListShippedListsTheReadOnlyDatabasesInLookupOrder) {
  // A database in $KTUNE_DB_PATH is read before those installed with ktune: listed first, each
  // under its path; --json names each row's database.
  const std::filesystem::path db = make_db();
  const std::string env = "KTUNE_DB_PATH='" + db.string() + "'";
  CliRun r = ktune("db list --shipped", env);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(db.string() + ":"), 0u) << r.out;
  EXPECT_NE(r.out.find("threads=256,rows=1,vec=8,regs=1"), std::string::npos) << r.out;
  CliRun j = ktune("db list --shipped --json --op add_rmsnorm", env);
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(j.out.find("[{\"database\":\"" + db.string() + "\""), 0u) << j.out;
  CliRun both = ktune("db list --shipped --db " + db.string(), env);
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--shipped and --db are exclusive"), std::string::npos) << both.err;
}

TEST_F(Cli, BestWithoutAGpuPointsAtDevice) {
  if (test::gpu_missing_reason().empty()) GTEST_SKIP() << "a GPU is present";
  CliRun r = ktune("best --op add_rmsnorm --shape m=64,n=4096");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("--device NAME or --arch A"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
}

}  // namespace
}  // namespace ktune
