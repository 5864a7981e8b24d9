// What ktune writes: exports that never destroy their database, output errors that are reported,
// and text from a database that cannot drive the terminal.
#include <sys/stat.h>
#include <unistd.h>

#include "db/sqlite.hpp"
#include "templates/op.hpp"
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

// Every file of a directory but the captured stdout and stderr, with its size.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "stdout" || name == "stderr") continue;
    std::error_code ec;
    out.push_back(name + (e.is_regular_file(ec) ? ":" + std::to_string(e.file_size(ec)) : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(Cli, ExportNeverWritesOverTheDatabaseItReads) {
  const fs::path db = make_db("x.db");
  const std::string before = slurp(db);
  fs::create_symlink("x.db", dir.path() / "link.db");
  fs::create_hard_link(db, dir.path() / "hard.db");
  fs::create_directory(dir.path() / "sub");
  for (const std::string& target :
       {std::string("x.db"), std::string("./x.db"), std::string("sub/../x.db"), db.string(),
        std::string("hard.db"), std::string("x.db-wal"), std::string("x.db-journal")}) {
    for (const std::string& source : {std::string("x.db"), std::string("link.db")}) {
      const std::string args = "db export --db " + source + " -o " + target;
      CliRun r = ktune(args);
      EXPECT_EQ(r.code, 2) << args;
      EXPECT_TRUE(contains(r.err, "refusing to write over it")) << args << "\n" << r.err;
      EXPECT_EQ(lines(r.err), 1u) << args << "\n" << r.err;
      EXPECT_EQ(slurp(db), before) << args;
    }
  }
  EXPECT_FALSE(fs::exists(dir.path() / "x.db-wal"));
  EXPECT_FALSE(fs::exists(dir.path() / "x.db-journal"));
  CliRun list = ktune("db list --db x.db");
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(contains(list.out, "threads=256,rows=1,vec=8,regs=1")) << list.out;
}

TEST_F(Cli, ExportRefusesSymlinksAndSpecialFiles) {
  make_db("x.db");
  { std::ofstream(dir.path() / "other.json") << "keep me"; }
  fs::create_symlink("other.json", dir.path() / "link.json");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  fs::create_directory(dir.path() / "adir");
  const struct {
    const char* target;
    const char* expect;
  } cases[] = {
      {"link.json", "is a symbolic link"},
      {"/dev/full", "is a character device, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
      {"fifo", "is a FIFO, not a regular file"},  // before: blocked forever opening it
      {"adir", "is a directory, not a regular file"},
  };
  for (const auto& c : cases) {
    // `timeout`: a FIFO target must be refused, not block the export.
    CliRun r = ktune(std::string("db export --db x.db -o ") + c.target, "timeout 20");
    EXPECT_EQ(r.code, 2) << c.target;
    EXPECT_TRUE(contains(r.err, c.expect)) << c.target << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
  EXPECT_EQ(slurp(dir.path() / "other.json"), "keep me");
  EXPECT_TRUE(fs::is_symlink(dir.path() / "link.json"));
}

TEST_F(Cli, ExportReplacesAtomicallyKeepingThePermissions) {
  make_db("x.db");
  const fs::path out = dir.path() / "out.json";
  { std::ofstream(out) << "old"; }
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  CliRun r = ktune("db export --db x.db -o out.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(slurp(out), "\"threads=256,rows=1,vec=8,regs=1\"")) << slurp(out);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  // A new file: 0666 less the umask, as any program's.
  CliRun n = ktune("db export --db x.db -o new.csv --format csv", "", "umask 027");
  ASSERT_EQ(n.code, 0) << n.err;
  ASSERT_EQ(::stat((dir.path() / "new.csv").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{
                                     "new.csv:" + std::to_string(slurp(dir.path() / "new.csv").size()),
                                     "out.json:" + std::to_string(slurp(out).size()),
                                     "x.db:" + std::to_string(fs::file_size(dir.path() / "x.db"))}))
      << "no temporary file left behind";
}

TEST_F(Cli, AFailedExportLeavesTheOldFileAndNoTemporary) {
  make_db("x.db", "", "ktune sweep", std::string(8000, 'd'));  // an export of over 8 KB
  const fs::path out = dir.path() / "out.json";
  { std::ofstream(out) << "the previous export"; }
  // A file size limit of 2 blocks (1 or 2 KB: room for the message on stderr) makes the export's
  // writes fail with EFBIG (SIGXFSZ ignored).
  CliRun r = ktune("db export --db x.db -o out.json", "", "trap '' XFSZ; ulimit -f 2");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot write -o \"out.json\"")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(slurp(out), "the previous export");
  EXPECT_EQ(listing(dir.path()).size(), 2u) << "only x.db and out.json";
  CliRun missing = ktune("db export --db x.db -o no/such/dir/out.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(contains(missing.err, "cannot create a temporary file in \"no/such/dir\"")) << missing.err;
}

TEST_F(Cli, WritingStandardOutputFailsLoudly) {
  make_db("x.db");
  const struct {
    const char* args;
    const char* redirect;
    const char* reason;
  } cases[] = {
      {"ops", ">/dev/full", "No space left on device"},
      {"ops --json", ">/dev/full", "No space left on device"},
      {"db export --db x.db", ">/dev/full", "No space left on device"},
      {"db list --db x.db", ">/dev/full", "No space left on device"},
      {"ops", ">&-", "Bad file descriptor"},
      {"db list --db x.db", ">&-", "Bad file descriptor"},
      {"--help", ">&-", "Bad file descriptor"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args, "", "", c.redirect);
    EXPECT_EQ(r.code, 1) << c.args << " " << c.redirect;
    EXPECT_TRUE(contains(r.err, "cannot write standard output: " + std::string(c.reason)))
        << c.args << " " << c.redirect << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
}

TEST_F(Cli, DatabaseTextCannotDriveTheTerminal) {
  // A device name, a command line and a trial detail with escape sequences, a bell, a forged
  // line and a C1 control (U+009B, CSI).
  const std::string device = "GPU\x1b[2J\x1b]0;owned\x07";
  const std::string command = "ktune sweep\nforged line\r\x1b[31mred\xc2\x9b" "31m";
  const std::string detail = "bad\x1b[1Adetail";
  const fs::path db = make_db("x.db", device, command, detail);
  for (const std::string& args :
       {std::string("db list --db x.db"), std::string("db show --db x.db"),
        std::string("best --op add_rmsnorm --shape m=64,n=4096 --no-shipped --device ") +
            "'" + device + "' --db x.db"}) {
    CliRun r = ktune(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    for (const std::string* s : {&r.out, &r.err}) {
      EXPECT_EQ(s->find('\x1b'), std::string::npos) << args << "\n" << *s;
      EXPECT_EQ(s->find('\x07'), std::string::npos) << args << "\n" << *s;
      EXPECT_EQ(s->find('\r'), std::string::npos) << args << "\n" << *s;
      EXPECT_EQ(s->find("\xc2\x9b"), std::string::npos) << args << "\n" << *s;
    }
    EXPECT_TRUE(contains(r.out, "GPU\\x1b[2J\\x1b]0;owned\\x07")) << args << "\n" << r.out;
  }
  CliRun show = ktune("db show --db x.db");
  EXPECT_TRUE(contains(show.out, "ktune sweep\\nforged line\\r\\x1b[31mred\\xc2\\x9b31m")) << show.out;
  EXPECT_FALSE(contains(show.out, "\nforged line")) << "no line of the database's making";
  EXPECT_TRUE(contains(show.out, "bad\\x1b[1Adetail")) << show.out;
}

TEST_F(Cli, JsonOutputIsValidAndEscapesEveryControl) {
  // DEL, ESC, a C1 control, a byte that is not UTF-8, U+2028, and plain UTF-8 (kept).
  make_db("x.db", std::string("GPU\x7f\x1b\xc2\x85\xff\xe2\x80\xa8 \xc3\xa9"));
  CliRun r = ktune("db list --json --db x.db");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"device\":\"GPU\\u007f\\u001b\\u0085\\ufffd\\u2028 \xc3\xa9\""))
      << r.out;
  for (char c : r.out) EXPECT_FALSE(c == '\x7f' || c == '\x1b' || c == '\xff') << r.out;
}

TEST_F(Cli, DbCheckReportsEveryProblemAndExitsByHealth) {
  make_db("x.db");
  CliRun ok = ktune("db check --db x.db");
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_TRUE(contains(ok.out, "ok (")) << ok.out;
  CliRun j = ktune("db check --json --db x.db");
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_TRUE(contains(j.out, "\"integrity\":\"ok\"")) << j.out;
  EXPECT_TRUE(contains(j.out, "\"ok\":true")) << j.out;

  // A best row outside add_rmsnorm's space (threads=7) and a trial with a negative timing.
  const fs::path bad = make_db("bad.db");
  {
    Store s = Store::open(bad, Store::Mode::read_write);
    TrialRecord t;
    t.device_key = device_for_arch("sm_90a")->key();
    t.op = "add_rmsnorm";
    t.problem_key = "m=64,n=4096";
    t.params_key = "threads=7,rows=1,vec=8,regs=1";
    t.template_hash = get_op("add_rmsnorm").template_hash();  // current code: checked in full
    t.median_us = 1.0;  // faster: becomes the best
    s.record_trial(t);
  }
  {
    db::Connection c(bad, db::OpenMode::read_write_create);
    c.exec("UPDATE trials SET median_us = -3 WHERE params_key = 'threads=32,rows=8,vec=8,regs=1'");
  }
  CliRun r = ktune("db check --db bad.db");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "threads=7")) << r.out;
  EXPECT_TRUE(contains(r.out, "trials row 2")) << r.out;
  // The best row and its trial (threads=7), and the negative timing; the rows of "h" are stale.
  EXPECT_TRUE(contains(r.out, "3 problems")) << r.out;
  EXPECT_TRUE(contains(r.out, "tuned for older kernel code")) << r.out;
  CliRun rj = ktune("db check --json --db bad.db");
  EXPECT_EQ(rj.code, 1);
  EXPECT_TRUE(contains(rj.out, "\"ok\":false")) << rj.out;

  { std::ofstream(dir.path() / "junk.db") << std::string(8192, 'x'); }
  CliRun junk = ktune("db check --db junk.db");
  EXPECT_EQ(junk.code, 4) << junk.err;
  EXPECT_EQ(lines(junk.err), 1u) << junk.err;
  CliRun none = ktune("db check --db none.db");
  EXPECT_EQ(none.code, 4) << none.err;
  EXPECT_TRUE(contains(none.err, "\"none.db\" does not exist")) << none.err;
  EXPECT_FALSE(fs::exists(dir.path() / "none.db"));
}

TEST_F(Cli, AnUnsafeCacheDirectoryIsLeftAloneWithAWarning) {
  // A shared, world-writable directory (like /tmp) named as the cache: never chmod-ed, never
  // written, and said so once on stderr; the compile itself still happens (in memory).
  const fs::path shared = dir.path() / "shared";
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  CliRun r = ktune("space --op softmax --shape m=64,n=64 --arch sm_80 --compile --jobs 2 --list",
                   "KTUNE_CACHE_DIR='" + shared.string() + "'");
  struct stat st {};
  ASSERT_EQ(::stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  EXPECT_TRUE(fs::is_empty(shared));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "warning")) << r.err;
  EXPECT_TRUE(contains(r.err, "shared")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(contains(r.out, "compiled, 0 failed")) << r.out;
}

}  // namespace
}  // namespace ktune
