#include "tests/support/test_env.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

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

std::vector<std::size_t> covering_sample(const std::vector<Params>& points, std::size_t stride,
                                         std::size_t offset) {
  if (stride == 0) throw std::invalid_argument("covering_sample: stride must be at least 1");
  std::set<std::pair<std::size_t, std::int64_t>> covered;  // (tunable position, value)
  std::set<std::size_t> taken;
  const auto take = [&](std::size_t i) {
    taken.insert(i);
    for (std::size_t t = 0; t < points[i].values.size(); ++t)
      covered.insert({t, points[i].values[t]});
  };
  for (std::size_t i = offset % stride; i < points.size(); i += stride) take(i);
  for (std::size_t i = 0; i < points.size(); ++i)
    for (std::size_t t = 0; t < points[i].values.size(); ++t)
      if (!covered.count({t, points[i].values[t]})) {
        take(i);
        break;
      }
  return {taken.begin(), taken.end()};
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
