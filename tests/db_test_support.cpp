#include "db_test_support.hpp"

#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <regex>

namespace ktune::test {

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("ktune-db-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(std::random_device{}()));
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path_, ec);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

fs::path sibling(const fs::path& db, const char* suffix) {
  fs::path p = db;
  p += suffix;
  return p;
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

int header_journal_mode(const fs::path& db) {
  const std::string bytes = read_bytes(db);
  return bytes.size() >= 100 ? static_cast<unsigned char>(bytes[18]) : -1;
}

void raw_exec(const fs::path& p, const char* sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  c.exec(sql);
}

std::int64_t raw_int(const fs::path& p, const std::string& sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  db::Statement s(c.get(), sql, c.label());
  return s.row().int64(0);
}

std::string raw_text(const fs::path& p, const std::string& sql) {
  db::Connection c(p, db::OpenMode::read_write_create);
  db::Statement s(c.get(), sql, c.label());
  return s.row().text(0);
}

std::int64_t raw_insert(const db::Connection& c, const std::string& table, const Row& row) {
  std::string columns, values;
  for (std::size_t i = 0; i < row.size(); ++i) {
    columns += (i == 0 ? "" : ", ") + row[i].first;
    values += (i == 0 ? "?" : ", ?") + std::to_string(i + 1);
  }
  db::Statement s(c.get(), "INSERT INTO " + table + " (" + columns + ") VALUES (" + values + ")",
                  c.label());
  for (std::size_t i = 0; i < row.size(); ++i)
    std::visit([&](const auto& v) { s.bind(static_cast<int>(i + 1), v); }, row[i].second);
  s.run();
  return db::Statement(c.get(), "SELECT last_insert_rowid()", c.label()).row().int64(0);
}

Row with(Row row, const Row& changes) {
  for (const auto& [column, value] : changes) {
    bool found = false;
    for (auto& [name, v] : row)
      if (name == column) {
        v = value;
        found = true;
      }
    if (!found) row.emplace_back(column, value);
  }
  return row;
}

DeviceInfo test_device() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.memory_bytes = 85'520'809'984;
  d.l2_bytes = 52'428'800;
  d.smem_optin_per_block = 232'448;
  d.smem_per_sm = 233'472;
  d.regs_per_block = 65'536;
  d.regs_per_sm = 65'537;  // distinct from regs_per_block, so a swapped column shows
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.driver_version = 13000;
  d.nvrtc_version = 12090;
  d.memory_bandwidth = 3'352'320'000'000;  // 2 x 2619 MHz x 5120 bits
  return d;
}

TrialRecord make_trial(const std::string& problem, const std::string& params, double median,
                       TrialStatus status, const std::string& hash) {
  TrialRecord t;
  t.device_key = test_device().key();
  t.op = "rmsnorm";
  t.dtype = DType::bf16;
  t.problem_key = problem;
  t.params_key = params;
  t.template_hash = hash;
  t.nvrtc_version = 12090;
  t.status = status;
  t.median_us = median;
  return t;
}

bool is_timestamp(const std::string& s) {
  static const std::regex utc(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  return std::regex_match(s, utc);
}

void expect_same_device(const DeviceInfo& a, const DeviceInfo& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cc_major, b.cc_major);
  EXPECT_EQ(a.cc_minor, b.cc_minor);
  EXPECT_EQ(a.sm_count, b.sm_count);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
  EXPECT_EQ(a.l2_bytes, b.l2_bytes);
  EXPECT_EQ(a.smem_optin_per_block, b.smem_optin_per_block);
  EXPECT_EQ(a.smem_per_sm, b.smem_per_sm);
  EXPECT_EQ(a.regs_per_block, b.regs_per_block);
  EXPECT_EQ(a.regs_per_sm, b.regs_per_sm);
  EXPECT_EQ(a.max_threads_per_block, b.max_threads_per_block);
  EXPECT_EQ(a.max_threads_per_sm, b.max_threads_per_sm);
  EXPECT_EQ(a.driver_version, b.driver_version);
  EXPECT_EQ(a.nvrtc_version, b.nvrtc_version);
  EXPECT_EQ(a.memory_bandwidth, b.memory_bandwidth);
}

SweepRecord test_sweep(const std::string& strategy) {
  SweepRecord sweep;
  sweep.device_key = test_device().key();
  sweep.op = "rmsnorm";
  sweep.problem_key = "n=*";
  sweep.strategy = strategy;
  return sweep;
}

void populate(const fs::path& p, int trials) {
  Store s = Store::open(p, Mode::read_write);
  s.upsert_device(test_device());
  const std::int64_t sweep_id = s.begin_sweep(test_sweep());
  for (int i = 0; i < trials; ++i) {
    TrialRecord t =
        make_trial("n=" + std::to_string(i % 4), "block=" + std::to_string(i),
                   10.0 + (i * 37) % 101, i % 9 == 4 ? TrialStatus::timeout : TrialStatus::ok);
    t.sweep_id = sweep_id;
    t.detail =
        std::string(static_cast<std::size_t>(60 + (i * 53) % 240), static_cast<char>('a' + i % 26));
    s.record_trial(t);
  }
}

namespace {

// Forks; the child runs `f` (after `prepare`, which may replace it with a failure message) and
// sends back the result. Returns nullopt when `limit` passed first (the child is killed).
std::optional<std::string> in_child(const std::function<std::string()>& f,
                                    const std::function<std::string()>& prepare,
                                    std::optional<std::chrono::milliseconds> limit) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string result = prepare();
    if (result.empty()) {
      try {
        result = f();
      } catch (const std::exception& e) {
        result = std::string("threw: ") + e.what();
      }
    }
    const ssize_t written = write(fds[1], result.data(), result.size());
    _exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string result;
  const auto deadline = std::chrono::steady_clock::now() + limit.value_or(std::chrono::hours(1));
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) == 0) {
      timed_out = true;
      break;
    }
    char buf[512];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    result.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return std::nullopt;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed: " + result;
  return result;
}

}  // namespace

std::string run_unprivileged(const std::function<std::string()>& check) {
  if (geteuid() != 0) return check();
  const auto drop = []() -> std::string {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
      return "skip: cannot drop to uid 65534";
    return {};
  };
  return *in_child(check, drop, std::nullopt);
}

std::optional<std::string> run_with_deadline(const std::function<std::string()>& f,
                                             std::chrono::milliseconds limit) {
  return in_child(f, [] { return std::string(); }, limit);
}

}  // namespace ktune::test
