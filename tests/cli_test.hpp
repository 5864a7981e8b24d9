// The ktune command run as a user would, from a shell: shared by the tests/cli_*_test.cpp files.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "db/store.hpp"
#include "tests/support/test_env.hpp"

namespace ktune::test {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

class Cli : public ::testing::Test {
 protected:
  TempDir dir;

  /// Runs `ktune ARGS` in the test's directory, with a private data and cache directory so the
  /// test touches nothing of the user's. `env` goes before the command (VAR=value ...); `shell`
  /// runs before it in the same shell (umask, ulimit, trap).
  CliRun ktune(const std::string& args, const std::string& env = "", const std::string& shell = "") {
    return run(args, env, shell, ">'" + (dir.path() / "stdout").string() + "'");
  }

  /// The same with standard output redirected as `redirect` says (">/dev/full", ">&-"); `out` is
  /// then empty.
  CliRun run(const std::string& args, const std::string& env, const std::string& shell,
             const std::string& redirect) {
    const std::filesystem::path out = dir.path() / "stdout", err = dir.path() / "stderr";
    std::filesystem::remove(out);
    const std::string base = "env -u KTUNE_DB -u KTUNE_DB_PATH XDG_DATA_HOME='" +
                             (dir.path() / "data").string() + "' KTUNE_CACHE_DIR='" +
                             (dir.path() / "cache").string() + "' " + env + " ";
    const std::string cmd = "cd '" + dir.path().string() + "' && " +
                            (shell.empty() ? "" : shell + "; ") + base + cli_path() + " " + args +
                            " " + redirect + " 2>'" + err.string() + "' </dev/null";
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  static std::size_t lines(const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }

  static bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  }

  /// A small database: one device, one sweep, an ok trial (the best) and an invalid one.
  /// `device_name`, `command_line` and `detail` may carry hostile text.
  std::filesystem::path make_db(const std::string& name = "t.db",
                                const std::string& device_name = "",
                                const std::string& command_line = "ktune sweep --op add_rmsnorm",
                                const std::string& detail = "a reason, with \"quotes\"") {
    const std::filesystem::path db = dir.path() / name;
    Store s = Store::open(db, Store::Mode::read_write);
    DeviceInfo d = *device_for_arch("sm_90a");
    if (!device_name.empty()) d.name = device_name;
    s.upsert_device(d);
    SweepRecord sw;
    sw.device_key = d.key();
    sw.op = "add_rmsnorm";
    sw.problem_key = "m=64,n=4096";
    sw.strategy = "exhaustive";
    sw.command_line = command_line;
    TrialRecord t;
    t.sweep_id = s.begin_sweep(sw);
    t.device_key = d.key();
    t.op = "add_rmsnorm";
    t.problem_key = "m=64,n=4096";
    t.params_key = "threads=256,rows=1,vec=8,regs=1";
    t.template_hash = "h";
    t.median_us = 12.5;
    s.record_trial(t);
    t.params_key = "threads=32,rows=8,vec=8,regs=1";
    t.status = TrialStatus::invalid;
    t.detail = detail;
    t.median_us = 0;
    s.record_trial(t);
    return db;
  }

};

}  // namespace ktune::test
