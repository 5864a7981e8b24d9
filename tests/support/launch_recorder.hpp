// Launchers for host-side tests of an op's run(): they record each launch and copy its argument
// bytes while the launch is made (the arguments live on run()'s stack, gone once it returns).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "templates/op.hpp"

namespace ktune::test {

/// One launch and a copy of its argument bytes.
struct RecordedLaunch {
  KernelLaunch launch;  // its `args` pointer is stale: read `args` below
  std::vector<unsigned char> args;
  /// The arguments as `A` (expects exactly sizeof(A) bytes).
  template <typename A>
  A as() const {
    A a{};
    EXPECT_EQ(args.size(), sizeof a);
    std::memcpy(&a, args.data(), std::min(args.size(), sizeof a));
    return a;
  }
};

/// Records every launch with a copy of its argument bytes.
class LaunchRecorder final : public Launcher {
 public:
  void launch(const KernelLaunch& l) override {
    const auto* bytes = static_cast<const unsigned char*>(l.args);
    launches.push_back({l, std::vector<unsigned char>(bytes, bytes + l.args_size)});
  }
  std::vector<RecordedLaunch> launches;
};

/// Records launches whose arguments are all one struct `Args`, copied as `Args`.
template <typename Args>
class RecordingLauncher final : public Launcher {
 public:
  void launch(const KernelLaunch& l) override {
    launches.push_back(l);
    Args a{};
    EXPECT_EQ(l.args_size, sizeof a);
    std::memcpy(&a, l.args, sizeof a);
    args.push_back(a);
  }
  std::vector<KernelLaunch> launches;  // their `args` pointers are stale: read `args` below
  std::vector<Args> args;
};

/// `op.run(a, launcher)`, or `op.run_reference` when `reference`, into a new `Recorder`.
template <typename Recorder>
Recorder record_run(const Op& op, const RunArgs& a, bool reference = false) {
  Recorder l;
  if (reference)
    op.run_reference(a, l);
  else
    op.run(a, l);
  return l;
}

}  // namespace ktune::test
