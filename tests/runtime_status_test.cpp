// What the runtime says it consults (issue 7, findings 2 and 5): Runtime::status(),
// ktune_runtime_report() and the KTUNE_LOG lines, all without a GPU.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "db/sqlite.hpp"
#include "db/store.hpp"
#include "ktune/ktune.h"
#include "ktune/ktune.hpp"
#include "templates/op.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected '" << (part) << "' in: " << (text)

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A database with one good best row and one whose parameters are outside the op's space.
fs::path db_with_a_bad_row(const fs::path& path) {
  const Op& op = get_op("add_rmsnorm");
  const DeviceInfo device = *device_for_arch("sm_90a");
  Store s = Store::open(path, Store::Mode::read_write);
  s.upsert_device(device);
  BestRecord b;
  b.device_key = device.key();
  b.op = "add_rmsnorm";
  b.dtype = DType::bf16;
  b.template_hash = op.template_hash();
  b.median_us = 5.0;
  b.problem_key = "m=64,n=4096";
  b.params_key = op.params_key(op.default_params(op.parse_problem(b.problem_key), b.dtype, device));
  s.set_best(b);
  b.problem_key = "m=128,n=4096";
  b.params_key = "threads=7777,rows=1,vec=1,regs=0";
  s.set_best(b);
  return path;
}

RuntimeOptions options(const fs::path& db, const fs::path& cache) {
  RuntimeOptions o;
  o.db_path = db.string();
  o.use_shipped_databases = false;
  o.cache_dir = cache.string();
  return o;
}

TEST(RuntimeStatus, WorksWithoutAGpu) {
  // On a machine without a GPU (CI), any CUDA call would throw NoDevice here.
  test::TempDir dir;
  Runtime rt(options(dir.path() / "user.db", dir.path() / "cache"));
  RuntimeStatus s = rt.status();
  ASSERT_EQ(s.databases.size(), 1u);
  EXPECT_EQ(s.databases[0].path, (dir.path() / "user.db").string());
  EXPECT_EQ(s.databases[0].state, DatabaseStatus::State::missing);
  EXPECT_CONTAINS(s.databases[0].reason, "not created yet");
  EXPECT_EQ(s.cache_dir, (dir.path() / "cache").string());
  EXPECT_EQ(s.cache_note, "");
  EXPECT_FALSE(fs::exists(dir.path() / "user.db"));
}

// Every entry point packs its op's dims and tensors before any CUDA call: with valid arguments
// it gets as far as the device (NoDevice here), not an InvalidArgument of its own making. (The
// prefill entry once packed 10 dims for an op of 11, and only a GPU run saw it.)
TEST(RuntimeStatus, EveryEntryPointReachesTheDevice) {
  if (test::gpu_missing_reason().empty())
    GTEST_SKIP() << "a GPU is here: fake addresses would be launched";
  {
    test::TempDir dir;
    Runtime rt(options(dir.path() / "user.db", dir.path() / "cache"));
    const auto p = [](std::uint64_t a) { return reinterpret_cast<void*>(a); };
    const auto expect_device = [](const char* what, auto&& call) {
      try {
        call();
        ADD_FAILURE() << what << ": returned without a device";
      } catch (const NoDevice&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
      }
    };
    expect_device("add_rmsnorm", [&] {
      rt.add_rmsnorm(p(0x1000), p(0x2000), p(0x3000), p(0x4000), p(0x5000), 64, 256, DType::bf16,
                     1e-6f, nullptr);
    });
    expect_device("layernorm", [&] {
      rt.layernorm(p(0x1000), nullptr, p(0x3000), p(0x4000), p(0x5000), nullptr, 64, 256,
                   DType::f16, 1e-5f, nullptr);
    });
    expect_device("layernorm with residual", [&] {
      rt.layernorm(p(0x1000), p(0x2000), p(0x3000), p(0x4000), p(0x5000), p(0x6000), 64, 256,
                   DType::bf16, 1e-5f, nullptr);
    });
    expect_device("bias_act", [&] {
      rt.bias_act(p(0x1000), p(0x2000), p(0x3000), 64, 256, Activation::silu, DType::bf16,
                  nullptr);
    });
    expect_device("swiglu",
                  [&] { rt.swiglu(p(0x1000), p(0x2000), 64, 256, DType::bf16, nullptr); });
    expect_device("softmax",
                  [&] { rt.softmax(p(0x1000), p(0x2000), 64, 256, 1.f, DType::f16, nullptr); });
    expect_device("flash_attention", [&] {
      rt.flash_attention(p(0x1000), p(0x2000), p(0x3000), p(0x4000), nullptr, 1, 8, 2, 100, 100,
                         64, true, 0.f, DType::bf16, nullptr);
    });
  }
}

// What the fused entry points and query can check without a device they check first, on a
// machine without a GPU too: the problem, the dtype, null tensors, and every scalar finite and in
// its range (review of stop 77: eps=NaN and m=-1 reported "no GPU").
TEST(RuntimeStatus, BadCallsNameTheirReasonBeforeTheDevice) {
  test::TempDir dir;
  Runtime rt(options(dir.path() / "user.db", dir.path() / "cache"));
  const auto p = [](std::uint64_t a) { return reinterpret_cast<void*>(a); };
  const auto expect_invalid = [](const char* what, const std::string& part, auto&& call) {
    try {
      call();
      ADD_FAILURE() << what << ": accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_CONTAINS(e.what(), part) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not an InvalidArgument: " << e.what();
    }
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_invalid("eps NaN", "add_rmsnorm: eps=nan is not allowed (a finite number >= 0", [&] {
    rt.add_rmsnorm(p(0x1000), p(0x2000), p(0x3000), p(0x4000), p(0x5000), 64, 256, DType::bf16,
                   nan, nullptr);
  });
  expect_invalid("eps negative", "layernorm: eps=-1 is not allowed", [&] {
    rt.layernorm(p(0x1000), nullptr, p(0x3000), p(0x4000), p(0x5000), nullptr, 64, 256,
                 DType::f16, -1.f, nullptr);
  });
  expect_invalid("scale infinite", "softmax: scale=inf is not allowed", [&] {
    rt.softmax(p(0x1000), p(0x2000), 64, 256, std::numeric_limits<float>::infinity(), DType::f16,
               nullptr);
  });
  expect_invalid("m negative", "m=-1", [&] {
    rt.add_rmsnorm(p(0x1000), p(0x2000), p(0x3000), p(0x4000), p(0x5000), -1, 256, DType::bf16,
                   1e-6f, nullptr);
  });
  expect_invalid("null x", "add_rmsnorm: tensor x is a null pointer", [&] {
    rt.add_rmsnorm(nullptr, p(0x2000), p(0x3000), p(0x4000), p(0x5000), 64, 256, DType::bf16,
                   1e-6f, nullptr);
  });
  expect_invalid("fp32 swiglu", "dtype fp32 is not supported by swiglu (it takes bf16, fp16)",
                 [&] { rt.swiglu(p(0x1000), p(0x2000), 64, 256, DType::f32, nullptr); });
  expect_invalid("query fp32", "dtype fp32 is not supported by add_rmsnorm",
                 [&] { rt.query("add_rmsnorm", "m=1,n=8", DType::f32); });
}

TEST(RuntimeStatus, ListsRefusedDatabasesAndSkippedRows) {
  test::TempDir dir;
  const fs::path fifo = dir.path() / "pipe.db";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(60);  // opening the FIFO would block: let SIGALRM fail the test, not hang CI
  RuntimeStatus s = Runtime(options(fifo, dir.path() / "cache")).status();  // must not block
  ASSERT_EQ(s.databases.size(), 1u);
  EXPECT_EQ(s.databases[0].state, DatabaseStatus::State::refused);
  EXPECT_CONTAINS(s.databases[0].reason, "FIFO");
  alarm(0);

  const fs::path db = db_with_a_bad_row(dir.path() / "bad.db");
  s = Runtime(options(db, dir.path() / "cache")).status();
  ASSERT_EQ(s.databases.size(), 1u);
  EXPECT_EQ(s.databases[0].state, DatabaseStatus::State::loaded);
  EXPECT_EQ(s.databases[0].reason, "");
  // Found before any lookup ran (no GPU here): status() reads every row once.
  ASSERT_EQ(s.databases[0].skipped_rows.size(), 1u);
  EXPECT_EQ(s.databases[0].skipped_count, 1u);
  EXPECT_CONTAINS(s.databases[0].skipped_rows[0], "m=128,n=4096");
  EXPECT_CONTAINS(s.databases[0].skipped_rows[0], "threads=7777");
}

TEST(RuntimeStatus, DiskCacheTurnedOffSaysSo) {
  test::TempDir dir;
  RuntimeOptions o = options(dir.path() / "user.db", dir.path() / "cache");
  o.disk_cache = false;
  RuntimeStatus s = Runtime(o).status();
  EXPECT_EQ(s.cache_dir, "");
  EXPECT_CONTAINS(s.cache_note, "disk_cache");
  EXPECT_FALSE(fs::exists(dir.path() / "cache"));
}

TEST(RuntimeStatus, UnsafeCacheDirectoryIsReportedAndLeftAlone) {
  // Needs the compiler's refusal of unsafe directories (runtime/core/compiler.cpp): until then
  // the directory is chmod-ed to 0700 and used.
  test::TempDir dir;
  const fs::path shared = dir.path() / "shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  RuntimeStatus s = Runtime(options(dir.path() / "user.db", shared)).status();
  EXPECT_EQ(s.cache_dir, "");
  EXPECT_CONTAINS(s.cache_note, shared.string());
  EXPECT_CONTAINS(s.cache_note, "writable");
  struct stat st {};
  ASSERT_EQ(stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
}

TEST(RuntimeReport, TruncatesAndSaysTheFullLength) {
  test::TempDir dir;
  // Not the user's cache: the global runtime reads $KTUNE_CACHE_DIR when configured.
  setenv("KTUNE_CACHE_DIR", (dir.path() / "cache").c_str(), 1);
  const fs::path db = dir.path() / "d\xc3\xa9j\xc3\xa0.db";  // "déjà.db": cut inside a character
  ASSERT_EQ(ktune_configure(db.c_str(), 0), KTUNE_OK) << ktune_last_error();

  std::size_t needed = 0;
  ASSERT_EQ(ktune_runtime_report(nullptr, 0, &needed), KTUNE_OK) << ktune_last_error();
  std::vector<char> full(needed + 8, '#');
  std::size_t again = 0;
  ASSERT_EQ(ktune_runtime_report(full.data(), full.size(), &again), KTUNE_OK);
  EXPECT_EQ(again, needed);
  const std::string text = full.data();
  EXPECT_EQ(text.size() + 1, needed);
  EXPECT_EQ(text, "database " + db.string() + ": missing (not created yet; a sweep creates it)\n" +
                      "compile cache: " + (dir.path() / "cache").string() + "\n");

  // Exactly size bytes: the text and its NUL fit.
  std::vector<char> exact(needed, '#');
  ASSERT_EQ(ktune_runtime_report(exact.data(), exact.size(), nullptr), KTUNE_OK);
  EXPECT_EQ(std::string(exact.data()), text);

  std::vector<char> small(11, '#');
  ASSERT_EQ(ktune_runtime_report(small.data(), small.size(), &again), KTUNE_OK);
  EXPECT_EQ(std::string(small.data()), text.substr(0, 10));
  EXPECT_EQ(again, needed);

  // A cut inside "é" backs up to the character's start.
  const std::size_t at = text.find("\xc3\xa9");
  std::vector<char> mid(at + 2, '#');  // room for at + 1 bytes: one byte of the two of "é"
  ASSERT_EQ(ktune_runtime_report(mid.data(), mid.size(), nullptr), KTUNE_OK);
  EXPECT_EQ(std::string(mid.data()), text.substr(0, at));

  char one = '#';
  ASSERT_EQ(ktune_runtime_report(&one, 1, nullptr), KTUNE_OK);
  EXPECT_EQ(one, '\0');

  EXPECT_EQ(ktune_runtime_report(nullptr, 5, &needed), KTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(ktune_last_error(), "text is null");
  ASSERT_EQ(ktune_configure(nullptr, 1), KTUNE_OK);
  unsetenv("KTUNE_CACHE_DIR");
}

TEST(RuntimeLog, SaysEachFactOncePerRuntime) {
  test::TempDir dir;
  const fs::path fifo = dir.path() / "pipe.db";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const fs::path corrupt = dir.path() / "corrupt.db";
  std::ofstream(corrupt) << std::string(8192, 'x');
  const fs::path bad = db_with_a_bad_row(dir.path() / "bad.db");
  const fs::path log = dir.path() / "stderr.txt";

  // In a child, so that KTUNE_LOG and fd 2 change for it alone.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    try {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || dup2(fd, 2) < 0) _exit(2);
      setenv("KTUNE_LOG", "1", 1);
      setenv("KTUNE_DB_PATH", (corrupt.string() + ":" + bad.string()).c_str(), 1);
      RuntimeOptions o = options(fifo, dir.path() / "cache");
      o.use_shipped_databases = true;
      Runtime rt(o);
      rt.status();
      rt.status();
      rt.reset();  // reopens the databases: the same facts, not logged again
      rt.status();
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  const std::string text = read_file(log);
  EXPECT_EQ(count(text, "ktune: database " + fifo.string() + ": refused: is a FIFO"), 1u) << text;
  EXPECT_EQ(count(text, "ktune: database " + corrupt.string() + ": refused: "), 1u) << text;
  EXPECT_EQ(count(text, "ktune: database " + bad.string() + ": loaded\n"), 1u) << text;
  EXPECT_EQ(count(text, "ktune: database " + bad.string() + ": skipped best row"), 1u) << text;
  EXPECT_EQ(count(text, "\"threads=7777,rows=1,vec=1,regs=0\" is outside the space"), 1u) << text;
  EXPECT_EQ(count(text, "ktune: compile cache: " + (dir.path() / "cache").string() + "\n"), 1u)
      << text;
  // The shipped databases of this tree are listed too; still, no line twice.
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; at < text.size(); at = end + 1) {
    end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].rfind("ktune: ", 0), 0u) << lines[i];
    for (std::size_t j = i + 1; j < lines.size(); ++j) EXPECT_NE(lines[i], lines[j]);
  }
}

TEST(RuntimeLog, SilentWithoutKtuneLog) {
  test::TempDir dir;
  const fs::path corrupt = dir.path() / "corrupt.db";
  std::ofstream(corrupt) << std::string(8192, 'x');
  const fs::path log = dir.path() / "stderr.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(2);
    unsetenv("KTUNE_LOG");
    try {
      Runtime(options(corrupt, dir.path() / "cache")).status();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_file(log), "");
}

}  // namespace
}  // namespace ktune
