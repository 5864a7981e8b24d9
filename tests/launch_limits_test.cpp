// Every op's launches stay within what CUDA accepts, on problems drawn across each dim's whole
// range (its extremes included), for the built-in defaults and random points of the space, on
// sm_80, sm_90a and an H200-like sm_90a (the defaults branch on memory bandwidth per SM). For
// each configuration the op calls valid: its launches through a recording launcher have grids
// within 2^31 - 1 x 65535 x 65535, at most 1024 threads a block, at most 227 KiB of shared
// memory, whole clusters, and the block size and shared memory the op declares for that kernel
// (block_threads, dynamic_shared_bytes: what the tuner checks against the compiled kernel before
// a launch); every workspace address in their arguments lies inside the workspace the op asks
// for (the workspace sits at an address no other argument can take: 0x7B5AD << 44). A run may
// refuse a configuration only with InvalidArgument and a message. The
// wgmma kernels' tensor maps are encoded by the driver: ctest runs this test over the stand-in
// driver of tests/support/stub_driver.c (no device needed), so their launches are checked too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/types.hpp"
#include "templates/op.hpp"
#include "tests/support/launch_recorder.hpp"

namespace ktune {
namespace {

constexpr std::uint64_t kWorkspace = 0x7B5AD00000000000ull;

/// The 8-byte-aligned words of a launch's arguments that point into [kWorkspace, kWorkspace +
/// 2^40): workspace addresses (no tensor, size or packed pair of ints takes such a value).
std::vector<std::uint64_t> workspace_offsets(const test::RecordedLaunch& r) {
  std::vector<std::uint64_t> out;
  for (std::size_t at = 0; at + 8 <= r.args.size(); at += 8) {
    std::uint64_t v = 0;
    std::memcpy(&v, r.args.data() + at, 8);
    if (v >= kWorkspace && v - kWorkspace < (std::uint64_t{1} << 40)) out.push_back(v - kWorkspace);
  }
  return out;
}

/// A problem of `op` with each dim drawn log-uniformly over its range, its minimum or maximum
/// one time in ten each; page sizes from the listed ones, sizes that are multiples of 8 where
/// rows are read in 16-byte chunks. The op may refuse it (then it is not counted).
Problem draw_problem(const Op& op, std::mt19937_64& rng) {
  Problem p;
  for (const DimSpec& d : op.dims()) {
    std::int64_t v = 0;
    if (d.enumerated()) {
      v = static_cast<std::int64_t>(rng() % d.choices.size());
    } else if (d.name == "page") {
      const std::int64_t pages[] = {0, 16, 32, 64, 128, 256};
      v = pages[rng() % 6];
    } else {
      const int r = static_cast<int>(rng() % 10);
      const double lo = std::log(static_cast<double>(d.min));
      const double hi = std::log(static_cast<double>(d.max));
      v = r == 0   ? d.max
          : r == 1 ? d.min
                   : static_cast<std::int64_t>(
                         std::exp(lo + (hi - lo) * static_cast<double>(rng() % 100000) / 1e5));
      if (d.name == "d" || d.name == "h" || d.name == "i" || d.name == "n") v = (v + 7) / 8 * 8;
      v = std::min(std::max(v, d.min), d.max);
    }
    p.values.push_back(v);
  }
  return p;
}

/// `n` problems of `op` that it accepts, drawn with draw_problem() from `seed` (most draws of
/// the attention and MoE ops break a rule between dims: hq a multiple of hkv, k at most e, ...).
std::vector<Problem> accepted_problems(const Op& op, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Problem> out;
  for (int draw = 0; draw < 100000 && out.size() < n; ++draw) {
    Problem p = draw_problem(op, rng);
    try {
      op.check_problem(p);
    } catch (const InvalidArgument&) {
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

/// Kernel handles 0x1000 + i for `count` kernels; fake tensors 2^32 * (i + 1).
struct FakeCall {
  std::vector<KernelHandle> handles;
  std::uint64_t tensors[16];
  double scalars[4] = {0.125, 30.0, 1.0, 1.0};
  explicit FakeCall(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i)
      handles.push_back(reinterpret_cast<KernelHandle>(0x1000 + i));
    for (int i = 0; i < 16; ++i) tensors[i] = 0x100000000ull * static_cast<unsigned>(i + 1);
  }
  RunArgs args(const Params& q, const Problem& p, DType t, std::uint64_t workspace) const {
    RunArgs a;
    a.params = &q;
    a.problem = &p;
    a.dtype = t;
    a.tensors = tensors;
    a.scalars = scalars;
    a.workspace = workspace;
    a.kernels = handles.data();
    return a;
  }
};

/// Within what cudaLaunchKernel accepts (grid, block, shared memory, whole clusters).
bool fits_cuda(const KernelLaunch& l) {
  return l.grid[0] >= 1 && l.grid[0] <= 2147483647u && l.grid[1] >= 1 && l.grid[1] <= 65535 &&
         l.grid[2] >= 1 && l.grid[2] <= 65535 && l.block[0] >= 1 &&
         l.block[0] * l.block[1] * l.block[2] <= 1024 && l.shared_bytes <= 227 * 1024 &&
         l.cluster >= 1 && l.grid[0] % l.cluster == 0 && l.cluster_y >= 1 &&
         l.grid[1] % l.cluster_y == 0;
}

std::string what(const Op& op, const Problem& p, DType t, const DeviceInfo& dev,
                 const Params& q) {
  return std::string(op.name()) + " " + dtype_name(t) + " " + op.problem_key(p) + " on " +
         dev.arch() + " (" + std::to_string(dev.memory_bandwidth) + " B/s): " + op.params_key(q);
}

TEST(LaunchLimits, EveryOpsLaunchesFitCudaAndWhatTheOpDeclares) {
  DeviceInfo h200 = *device_for_arch("sm_90a");
  h200.memory_bandwidth = 4'800'000'000'000;
  const DeviceInfo devices[] = {*device_for_arch("sm_80"), *device_for_arch("sm_90a"), h200};
  for (const Op* op_ptr : all_ops()) {
    const Op& op = *op_ptr;
    const std::uint64_t seed = std::hash<std::string_view>{}(op.name());
    const std::vector<Problem> drawn = accepted_problems(op, 300, seed);
    std::mt19937_64 rng(seed + 1);  // the random points
    std::size_t problems = 0, configs = 0, launches = 0, failures = 0, no_driver = 0,
                workspace_addresses = 0;
    for (std::size_t at = 0; at < drawn.size() && failures < 10; ++at) {
      const Problem& p = drawn[at];
      ++problems;
      for (const DeviceInfo& dev : devices)
        for (DType t : op.dtypes())
          for (int point = 0; point < 4; ++point) {
            Params q;
            if (point == 0) {
              q = op.default_params(p, t, dev);
            } else {
              for (const Tunable& tu : op.tunables())
                q.values.push_back(tu.values[rng() % tu.values.size()]);
            }
            if (op.invalid_reason(q, p, t, dev)) continue;
            ++configs;
            const std::vector<KernelSource> kernels = op.kernels(q, p, t);
            const FakeCall call(kernels.size());
            const std::size_t workspace = op.workspace_bytes(q, p, t);
            RunArgs a = call.args(q, p, t, workspace > 0 ? kWorkspace : 0);
            a.sm_count = dev.sm_count;
            test::LaunchRecorder r;
            try {
              op.run(a, r);
            } catch (const NoDevice&) {
              ++no_driver;  // a tensor map to encode: a driver (or the stand-in) is needed
              continue;
            } catch (const InvalidArgument& e) {
              EXPECT_FALSE(std::string(e.what()).empty()) << what(op, p, t, dev, q);
              continue;
            }
            for (const test::RecordedLaunch& rec : r.launches) {
              const KernelLaunch& l = rec.launch;
              ++launches;
              const auto index = reinterpret_cast<std::uintptr_t>(l.kernel) - 0x1000;
              const bool ok =
                  index < kernels.size() && fits_cuda(l) &&
                  static_cast<int>(l.block[0]) == op.block_threads(q, p, t, index) &&
                  l.shared_bytes == op.dynamic_shared_bytes(q, p, t, index);
              for (std::uint64_t offset : workspace_offsets(rec)) {
                ++workspace_addresses;
                if (offset >= workspace) {
                  ++failures;
                  ADD_FAILURE() << what(op, p, t, dev, q) << ": kernel " << index
                                << " is passed workspace + " << offset << " of " << workspace
                                << " bytes";
                }
              }
              if (!ok) {
                ++failures;
                ADD_FAILURE() << what(op, p, t, dev, q) << ": kernel " << index << " grid "
                              << l.grid[0] << "x" << l.grid[1] << "x" << l.grid[2] << ", block "
                              << l.block[0] << " (declared "
                              << (index < kernels.size() ? op.block_threads(q, p, t, index) : -1)
                              << "), shared " << l.shared_bytes << ", cluster " << l.cluster;
                break;
              }
            }
          }
    }
    std::printf("%-16s %4zu problems, %6zu configurations, %6zu launches, %5zu workspace "
                "addresses checked, %zu not run (no driver to encode tensor maps)\n",
                std::string(op.name()).c_str(), problems, configs, launches, workspace_addresses,
                no_driver);
    if (Driver::available()) {
      EXPECT_EQ(no_driver, 0u) << op.name();
    }
    // Not vacuous: the draws reach the op's space and its launches.
    EXPECT_EQ(problems, 300u) << op.name();
    EXPECT_GT(launches, 1000u) << op.name();
  }
}

// The references the tuner checks every candidate against, on the same problems: their launches
// fit CUDA, name their own kernels, and pass workspace addresses inside
// reference_workspace_bytes(); with no workspace (every output row computed) they pass none.
TEST(LaunchLimits, EveryOpsReferenceLaunchesFitCudaAndItsWorkspace) {
  const DeviceInfo dev = *device_for_arch("sm_90a");
  for (const Op* op_ptr : all_ops()) {
    const Op& op = *op_ptr;
    std::size_t launches = 0, workspace_addresses = 0, failures = 0;
    const std::vector<Problem> drawn =
        accepted_problems(op, 300, std::hash<std::string_view>{}(op.name()));
    for (std::size_t at = 0; at < drawn.size() && failures < 10; ++at) {
      const Problem& p = drawn[at];
      for (DType t : op.dtypes()) {
        const Params q = op.default_params(p, t, dev);
        const std::vector<KernelSource> kernels = op.reference_kernels(p, t);
        const FakeCall call(kernels.size());
        const std::size_t workspace = op.reference_workspace_bytes(p, t);
        for (const bool with_workspace : {true, false}) {
          if (with_workspace && workspace == 0) continue;
          test::LaunchRecorder r;
          try {
            op.run_reference(call.args(q, p, t, with_workspace ? kWorkspace : 0), r);
          } catch (const InvalidArgument& e) {
            EXPECT_FALSE(std::string(e.what()).empty()) << what(op, p, t, dev, q);
            continue;
          }
          for (const test::RecordedLaunch& rec : r.launches) {
            const KernelLaunch& l = rec.launch;
            ++launches;
            const auto index = reinterpret_cast<std::uintptr_t>(l.kernel) - 0x1000;
            for (std::uint64_t offset : workspace_offsets(rec)) {
              ++workspace_addresses;
              if (offset >= (with_workspace ? workspace : 0)) {
                ++failures;
                ADD_FAILURE() << what(op, p, t, dev, q) << ": reference kernel " << index
                              << " is passed workspace + " << offset << " of "
                              << (with_workspace ? workspace : 0) << " bytes";
              }
            }
            if (index >= kernels.size() || !fits_cuda(l)) {
              ++failures;
              ADD_FAILURE() << what(op, p, t, dev, q) << ": reference kernel " << index
                            << " grid " << l.grid[0] << "x" << l.grid[1] << "x" << l.grid[2]
                            << ", block " << l.block[0] << ", shared " << l.shared_bytes;
            }
          }
        }
      }
    }
    std::printf("%-16s reference: %6zu launches, %5zu workspace addresses checked\n",
                std::string(op.name()).c_str(), launches, workspace_addresses);
    EXPECT_GT(launches, 300u) << op.name();
  }
}

}  // namespace
}  // namespace ktune
