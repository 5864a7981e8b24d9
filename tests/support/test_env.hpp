// Helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "templates/op.hpp"

namespace ktune::test {

/// Empty when a CUDA device is usable; otherwise why not.
std::string gpu_missing_reason();

/// The ktune executable: $KTUNE_CLI, else the one this build made.
std::string cli_path();

/// An sm_90 GPU other than device_for_arch("sm_90a")'s H100: another name and 114 SMs, so
/// another device key of the same architecture.
DeviceInfo other_sm90_device();

/// Every point of an op's space (the cartesian product of its tunables), first tunable slowest.
std::vector<Params> all_points(const Op& op);

/// Indices into `points` of a deterministic sample for the tests that compile configurations
/// (every valid point of every op would take CI's two cores too long): every `stride`-th point
/// from `offset`, then, in order, the first point holding each (tunable, value) that no point
/// taken so far holds. So every value any point takes is compiled at least once. Ascending.
std::vector<std::size_t> covering_sample(const std::vector<Params>& points, std::size_t stride,
                                         std::size_t offset = 0);

/// A fresh empty directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Runs a test suite's one-time setup and returns what it threw ("" when nothing). gtest skips
/// every case of a suite whose SetUpTestSuite throws, with no reason on the cases: keep this text
/// and check it with KTUNE_REQUIRE_SUITE in SetUp, so that each case fails with it.
template <typename F>
std::string suite_setup(F&& setup) {
  try {
    setup();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace ktune::test

/// Fails the current test when its suite's one-time setup failed (suite_setup's text).
#define KTUNE_REQUIRE_SUITE(error) \
  ASSERT_EQ(error, std::string()) << "the suite's one-time setup (SetUpTestSuite) failed"

/// Skips the current test, with the reason, when no GPU is usable.
#define KTUNE_REQUIRE_GPU()                                               \
  do {                                                                    \
    const std::string ktune_why_ = ::ktune::test::gpu_missing_reason();   \
    if (!ktune_why_.empty()) GTEST_SKIP() << "no GPU: " << ktune_why_;    \
  } while (0)
