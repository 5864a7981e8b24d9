// What ktune accepts: no stray or abbreviated arguments, one check for every number, the
// environment read one way everywhere, and one short line for each bad value.
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

TEST_F(Cli, StrayArgumentsAreErrorsNamingThem) {
  CliRun r = ktune("space --op softmax m=64,n=64");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unexpected argument \"m=64,n=64\"")) << r.err;
  EXPECT_TRUE(contains(r.err, "--shape \"m=64,n=64\"")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(r.out.empty()) << "nothing answered for the default problem:\n" << r.out;

  const std::string db = make_db().string();
  const std::string dbs[] = {
      "ops extra",
      "devices extra",
      "sweep --op add_rmsnorm 64x4096 --db " + db,
      "best --op softmax --arch sm_90a m=64,n=64",
      "db list --db " + db + " extra",
      "db show --db " + db + " extra",
      "db export --db " + db + " extra",
      "db check --db " + db + " extra",
  };
  for (const std::string& args : dbs) {
    CliRun s = ktune(args);
    EXPECT_EQ(s.code, 2) << args << "\n" << s.err;
    EXPECT_TRUE(contains(s.err, "unexpected argument")) << args << "\n" << s.err;
    EXPECT_EQ(lines(s.err), 1u) << args << "\n" << s.err;
    EXPECT_TRUE(s.out.empty()) << args << "\n" << s.out;
  }
}

TEST_F(Cli, AbbreviatedOptionsAreRejected) {
  const std::string db = make_db().string();
  for (const std::string& args :
       {"db list --d " + db, "db list --js --db " + db, "db export --form csv --db " + db,
        std::string("space --op softmax --ar sm_80"), std::string("space --op softmax --arch sm_80 --li"),
        "sweep --op add_rmsnorm --bud 1 --db " + db, std::string("best --op softmax --ar sm_90a")}) {
    CliRun r = ktune(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.err, "unrecognised option '--")) << args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
  }
}

TEST_F(Cli, EveryNumberIsFiniteAndInItsRange) {
  const std::string db = (dir.path() / "t.db").string();
  const struct {
    std::string args;
    std::string expect;
  } cases[] = {
      {"sweep --timeout nan", "--timeout \"nan\" is not allowed: expected a number from 0.1 to 3600"},
      {"sweep --timeout inf", "--timeout \"inf\" is not allowed: expected a number from"},
      {"sweep --timeout 1e300", "--timeout \"1e300\" is not allowed"},
      {"sweep --timeout 0", "--timeout \"0\" is not allowed"},
      {"sweep --timeout 20s", "--timeout \"20s\" is not allowed"},
      {"sweep --time-limit nan", "--time-limit \"nan\" is not allowed: expected a number from 0 to"},
      {"sweep --time-limit -1", "--time-limit \"-1\" is not allowed"},
      {"sweep --compile-timeout inf", "--compile-timeout \"inf\" is not allowed: expected a number from 0 to 3600"},
      {"sweep --compile-timeout -1", "--compile-timeout \"-1\" is not allowed"},
      {"sweep --budget 1.5", "--budget \"1.5\" is not allowed: expected an integer from 0 to"},
      {"sweep --budget 99999999999999999999", "--budget \"99999999999999999999\" is not allowed"},
      {"sweep --jobs -3", "--jobs \"-3\" is not allowed: expected an integer from 0 to 1024"},
      {"sweep --seed -1", "--seed \"-1\" is not allowed"},
      {"sweep --device -1", "--device \"-1\" is not allowed"},
      {"space --op softmax --jobs -3", "--jobs \"-3\" is not allowed: expected an integer from 0 to 1024"},
      {"space --op softmax --jobs nan", "--jobs \"nan\" is not allowed"},
      {"sweep --op moe --tokens 1,x,4", "--tokens \"1,x,4\" is not allowed: \"x\" is not an integer from 1 to"},
      {"sweep --op moe --tokens 1,,4", "--tokens \"1,,4\" is not allowed: \"\" is not an integer"},
      {"sweep --op moe --tokens 0", "--tokens \"0\" is not allowed: \"0\" is not an integer from 1"},
      {"sweep --op moe --tokens 16,", "--tokens \"16,\" is not allowed"},
      {"sweep --op moe --tokens 1,16 --shape e=8,k=2,h=256,i=512,t=4",
       "--tokens and --shape both set t: give one of them"},
      {"sweep --op softmax --tokens 1,2", "--tokens applies to ops with token buckets (moe)"},
      {"sweep --op softmax --strategy staged", "strategy staged: op softmax declares no search stages"},
      {"sweep --op moe --strategy bayes", "unknown strategy \"bayes\" (allowed: exhaustive, random, model, staged)"},
      {"sweep --op moe --tokens 1,70000 --shape e=8,k=2,h=256,i=512",
       "\"70000\" is not an integer from 1 to 65536"},
      {"sweep --from-misses /nonexistent/misses.tsv", "cannot read the miss log \"/nonexistent/misses.tsv\""},
      {"sweep --from-misses /dev/null --op softmax", "--from-misses names each problem's op, dtype and shape: leave out --op"},
      {"sweep --from-misses /dev/null", "the miss log \"/dev/null\" lists no problem to tune"},
      {"sweep --op softmax --params vec=3",
       "invalid parameters \"vec=3\" for softmax: vec=3 is not one of 1, 2, 4, 8"},
      {"sweep --op moe --params block_m=32 --params tile=4",
       "invalid parameters \"tile=4\" for moe: unknown parameter \"tile\""},
      {"sweep --op softmax --params vec=4,vec=8", "given twice"},
      {"sweep --plan /dev/null --params vec=4",
       "--plan names each problem's op, dtype and shape: leave out --params"},
      {"sweep --from-misses /dev/null --params vec=4",
       "--from-misses names each problem's op, dtype and shape: leave out --params"},
  };
  for (const auto& c : cases) {
    const std::string args = c.args + (c.args.rfind("sweep", 0) == 0 ? " --db " + db : "");
    CliRun r = ktune(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.expect)) << args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(db)) << args;
  }
  CliRun ok = ktune("space --op softmax --shape m=64,n=1024 --arch sm_80 --jobs 2");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST_F(Cli, AnEmptyKtuneDbIsUnsetEverywhere) {
  // db list: the default location, named with the variable that chose it.
  CliRun list = ktune("db list", "KTUNE_DB=");
  EXPECT_NE(list.code, 0);
  EXPECT_TRUE(contains(list.err, (dir.path() / "data" / "ktune" / "ktune.db").string())) << list.err;
  EXPECT_TRUE(contains(list.err, "(from $XDG_DATA_HOME)")) << list.err;
  // sweep: the default location is ktune's to create, so it goes on to look for a GPU (before:
  // "directory ... does not exist", as for a path the user chose).
  if (!test::gpu_missing_reason().empty()) {
    CliRun sweep = ktune("sweep --op add_rmsnorm --shape m=64,n=4096", "KTUNE_DB=");
    EXPECT_EQ(sweep.code, 3) << sweep.err;
    EXPECT_TRUE(contains(sweep.err, "no CUDA device found")) << sweep.err;
    EXPECT_FALSE(fs::exists(dir.path() / "data")) << "created only once a GPU is found";
  }
}

TEST_F(Cli, BadDatabaseLocationsNameTheirVariable) {
  const std::string long_path(5000, 'a');
  for (const std::string& args :
       {std::string("db list"), std::string("db check"), std::string("best --op softmax --arch sm_90a"),
        std::string("sweep --op add_rmsnorm --shape m=64,n=4096")}) {
    CliRun r = ktune(args, "KTUNE_DB=" + long_path);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_TRUE(contains(r.err, "(from $KTUNE_DB)")) << args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "File name too long")) << args << "\n" << r.err;
    EXPECT_FALSE(contains(r.err, "filesystem error")) << args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_LT(r.err.size(), 600u) << args;
  }
  // XDG_DATA_HOME names a file: the database directory cannot be created under it.
  { std::ofstream(dir.path() / "afile") << "x"; }
  const std::string xdg = "XDG_DATA_HOME=" + (dir.path() / "afile").string();
  CliRun sweep = ktune("sweep --op add_rmsnorm --shape m=64,n=4096", xdg);
  EXPECT_EQ(sweep.code, 4) << sweep.err;
  EXPECT_TRUE(contains(sweep.err, "(from $XDG_DATA_HOME)")) << sweep.err;
  EXPECT_TRUE(contains(sweep.err, "\"" + (dir.path() / "afile").string() + "\" is not a directory"))
      << sweep.err;
  EXPECT_EQ(lines(sweep.err), 1u) << sweep.err;
  CliRun list = ktune("db list", xdg);
  EXPECT_NE(list.code, 0);
  EXPECT_TRUE(contains(list.err, "(from $XDG_DATA_HOME)")) << list.err;
}

TEST_F(Cli, HelpCommandPrintsThatCommandsHelp) {
  CliRun r = ktune("help sweep");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "usage: ktune sweep")) << r.out;
  EXPECT_TRUE(contains(r.out, "--compile-timeout")) << r.out;
  for (const char* c : {"devices", "ops", "space", "best"}) {
    CliRun h = ktune(std::string("help ") + c);
    EXPECT_EQ(h.code, 0) << c;
    EXPECT_TRUE(contains(h.out, std::string("usage: ktune ") + c)) << c << "\n" << h.out;
  }
  CliRun db = ktune("help db");
  EXPECT_EQ(db.code, 0);
  EXPECT_TRUE(contains(db.out, "check")) << db.out;
  CliRun none = ktune("help frobnicate");
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(contains(none.err, "unknown command \"frobnicate\"")) << none.err;
}

TEST_F(Cli, EachBadValueIsOneShortLineNamingIt) {
  const std::string huge_shape = "m=" + std::string(100000, '7') + "a";
  const struct {
    std::string args;
    std::string expect;
    std::string never;
  } cases[] = {
      {"space --op add_rmsnorm --shape ,", "invalid shape \",\" for add_rmsnorm: \",\" is not an integer; a shape is name=value items (m, n)", "m=\",\""},
      {"space --op add_rmsnorm --shape 64xabc", "\"abc\" is not an integer; a shape is name=value items", ""},
      {"db list --db ''", "--db \"\": the database path is empty", "database  does"},
      {"best --op softmax --arch sm_90a --db ''", "--db \"\": the database path is empty", ""},
      {"space --op add_rmsnorm --shape " + huge_shape, "(100003 bytes)", ""},
      {"space --op " + std::string(100000, 'o'), "unknown op \"ooo", ""},
      {"space --" + std::string(100000, 'z'), "unrecognised option", ""},
      {"space --op add_rmsnorm --shape m=64,n=64,q=1" + std::string(100000, 'q'), "unknown dimension \"q", ""},
      {"best --op \"$(printf 'soft\\033[2Jmax')\" --arch sm_90a", "unknown op \"soft\\x1b[2Jmax\"", ""},
      {"space --op softmax --arch \"$(printf 'sm\\033]0;t\\007')\"", "unknown arch \"sm\\x1b]0;t\\x07\"", ""},
  };
  for (const auto& c : cases) {
    CliRun r = ktune(c.args);
    const std::string shown_args = c.args.substr(0, 80);
    EXPECT_EQ(r.code, 2) << shown_args << "\n" << r.err.substr(0, 300);
    EXPECT_TRUE(contains(r.err, c.expect)) << shown_args << "\n" << r.err.substr(0, 300);
    if (!c.never.empty()) {
      EXPECT_FALSE(contains(r.err, c.never)) << shown_args << "\n" << r.err;
    }
    EXPECT_EQ(lines(r.err), 1u) << shown_args << "\n" << r.err.substr(0, 300);
    EXPECT_LT(r.err.size(), 1000u) << shown_args;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << shown_args;
  }
}

}  // namespace
}  // namespace ktune
