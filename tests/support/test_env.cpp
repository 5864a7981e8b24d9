#include "tests/support/test_env.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>

#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"

namespace ktune::test {

std::string gpu_missing_reason() {
  std::string why;
  if (!Driver::available(&why)) return why;
  if (device_count() == 0) return "the CUDA driver reports no device";
  return {};
}

std::string cli_path() {
  const char* env = std::getenv("KTUNE_CLI");
  return env && *env ? env : KTUNE_CLI_PATH;
}

DeviceInfo other_sm90_device() {
  DeviceInfo d = *device_for_arch("sm_90a");
  d.name = "another sm_90 part";
  d.sm_count = 114;
  return d;
}

std::vector<Params> all_points(const Op& op) {
  std::vector<Params> out{Params{}};
  for (const Tunable& t : op.tunables()) {
    std::vector<Params> next;
    for (const Params& p : out)
      for (std::int64_t v : t.values) {
        Params q = p;
        q.values.push_back(v);
        next.push_back(std::move(q));
      }
    out = std::move(next);
  }
  return out;
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("ktune-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ktune::test
