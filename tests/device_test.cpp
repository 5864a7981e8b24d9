// The driver loader, error checks and device fingerprint. Every test runs on a machine without a
// GPU or libcuda; those that need a device skip with the reason.
#include <gtest/gtest.h>

#include "tests/support/test_env.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"

namespace ktune {
namespace {


#define REQUIRE_NO_DRIVER()                                                  \
  do {                                                                       \
    if (Driver::available()) GTEST_SKIP() << "a CUDA driver is installed";   \
  } while (0)

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Driver, AvailableAgreesWithGet) {
  std::string why;
  if (Driver::available(&why)) {
    EXPECT_NO_THROW(Driver::get());
  } else {
    EXPECT_FALSE(why.empty());
    try {
      Driver::get();
      FAIL() << "Driver::get() did not throw";
    } catch (const NoDevice& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
  EXPECT_NO_THROW(Driver::available());  // the null out-parameter is allowed
}

TEST(Driver, WithoutDriverEverythingSaysSo) {
  REQUIRE_NO_DRIVER();
  std::string why;
  EXPECT_FALSE(Driver::available(&why));
  EXPECT_TRUE(contains(why, "no CUDA driver") || contains(why, "no CUDA device")) << why;
  EXPECT_EQ(device_count(), 0);
  try {
    query_device(0);
    FAIL() << "query_device did not throw";
  } catch (const NoDevice& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "no CUDA driver") || contains(m, "no CUDA device")) << m;
  }
  EXPECT_THROW(ensure_context(0), NoDevice);
  EXPECT_THROW(Module{std::string("not a cubin")}, NoDevice);
  EXPECT_THROW(DeviceBuffer(16), NoDevice);
}

TEST(Driver, LibcudaMissingIsNamed) {
  REQUIRE_NO_DRIVER();
  std::string why;
  Driver::available(&why);
  if (!contains(why, "could not be loaded")) GTEST_SKIP() << "libcuda loads here: " << why;
  EXPECT_TRUE(contains(why, "no CUDA driver: libcuda.so.1 could not be loaded (")) << why;
}

TEST(Driver, EmptyHandlesNeedNoDriver) {
  DeviceBuffer empty(0);
  EXPECT_EQ(empty.get(), 0u);
  EXPECT_EQ(empty.size(), 0u);
  DeviceBuffer moved(std::move(empty));
  moved = DeviceBuffer();
  Module m;
  Module m2(std::move(m));
  m2 = Module();
  EXPECT_THROW(m2.function("k"), InvalidArgument);
  EXPECT_THROW(Module{std::string()}, InvalidArgument);
}

TEST(CuCheck, SuccessDoesNotThrow) { EXPECT_NO_THROW(cu_check(CUDA_SUCCESS, "cuFoo()")); }

TEST(CuCheck, StickyErrorsSayTheContextIsUnusable) {
  const CUresult sticky[] = {CUDA_ERROR_ILLEGAL_ADDRESS,       CUDA_ERROR_LAUNCH_FAILED,
                             CUDA_ERROR_MISALIGNED_ADDRESS,    CUDA_ERROR_ILLEGAL_INSTRUCTION,
                             CUDA_ERROR_HARDWARE_STACK_ERROR,  CUDA_ERROR_INVALID_PC,
                             CUDA_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_ASSERT,
                             CUDA_ERROR_ECC_UNCORRECTABLE,     CUDA_ERROR_CONTEXT_IS_DESTROYED,
                             CUDA_ERROR_LAUNCH_TIMEOUT};
  for (CUresult r : sticky) {
    try {
      cu_check(r, "cuCtxSynchronize()");
      FAIL() << "no throw for " << r;
    } catch (const CudaError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(e.sticky()) << m;
      EXPECT_EQ(e.code(), static_cast<int>(r));
      EXPECT_EQ(m.rfind("cuCtxSynchronize() failed: CUDA_ERROR_", 0), 0u) << m;
      EXPECT_TRUE(contains(m, "; the CUDA context is unusable")) << m;
    }
  }
}

TEST(CuCheck, NamesTheError) {
  try {
    cu_check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize(s)");
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_TRUE(contains(e.what(), "cuStreamSynchronize(s) failed: CUDA_ERROR_ILLEGAL_ADDRESS"))
        << e.what();
  }
}

TEST(CuCheck, OrdinaryErrorsAreNotSticky) {
  for (CUresult r : {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND,
                     CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_NO_BINARY_FOR_GPU}) {
    try {
      cu_check(r, "cuMemAlloc(&p, n)");
      FAIL();
    } catch (const CudaError& e) {
      EXPECT_FALSE(e.sticky()) << e.what();
      EXPECT_FALSE(contains(e.what(), "unusable")) << e.what();
      EXPECT_TRUE(contains(e.what(), "cuMemAlloc(&p, n) failed: CUDA_ERROR_")) << e.what();
    }
  }
}

TEST(CuCheck, UnknownCodeStillReported) {
  try {
    cu_check(static_cast<CUresult>(1000), "cuFoo()");
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), 1000);
    EXPECT_TRUE(contains(e.what(), "cuFoo() failed: ")) << e.what();
  }
}

CUresult pretend_call(int) { return CUDA_ERROR_MISALIGNED_ADDRESS; }

TEST(CuCheck, MacroQuotesTheExpression) {
  try {
    KTUNE_CU(pretend_call(42));
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_TRUE(contains(e.what(), "pretend_call(42) failed: CUDA_ERROR_MISALIGNED_ADDRESS"))
        << e.what();
    EXPECT_TRUE(e.sticky());
  }
}

TEST(Launcher, RefusesBadLaunchesBeforeTheDriver) {
  CudaLauncher launcher(nullptr);
  KernelLaunch l;
  EXPECT_THROW(launcher.launch(l), InvalidArgument);  // no kernel
  int dummy = 0;
  l.kernel = &dummy;
  l.args_size = 16;  // size without a struct
  EXPECT_THROW(launcher.launch(l), InvalidArgument);
  l.args_size = 0;
  // Refused with a message naming the grid and the cluster.
  const auto refused = [&](const std::string& message, const char* what) {
    try {
      launcher.launch(l);
      ADD_FAILURE() << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  l.grid[0] = 3;
  l.cluster = 2;  // a grid of 3 CTAs cannot be cut into clusters of 2
  refused("grid x 3 is not a multiple of the cluster size 2",
          "a grid x of 3 launched in clusters of 2");
  l.cluster = 0;
  EXPECT_THROW(launcher.launch(l), InvalidArgument);
  l.cluster = 1;
  l.grid[1] = 3;
  l.cluster_y = 2;  // nor a grid y of 3 into clusters of 2 along y
  refused("grid y 3 is not a multiple of the cluster's y size 2",
          "a grid y of 3 launched in clusters of 2 along y");
  l.cluster_y = 0;
  EXPECT_THROW(launcher.launch(l), InvalidArgument);
}

TEST(Launcher, WithoutDriverThrowsNoDevice) {
  REQUIRE_NO_DRIVER();
  CudaLauncher launcher(nullptr);
  int dummy = 0;
  struct {
    int x;
  } args{1};
  KernelLaunch l;
  l.kernel = &dummy;
  l.args = &args;
  l.args_size = sizeof args;
  EXPECT_THROW(launcher.launch(l), NoDevice);
}

TEST(Device, FingerprintIsSane) {
  KTUNE_REQUIRE_GPU();
  const DeviceInfo d = query_device(0);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 5);
  EXPECT_GE(d.cc_minor, 0);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.memory_bytes, std::int64_t{1} << 30);
  EXPECT_GT(d.l2_bytes, 0);
  // Peak DRAM bandwidth from the memory clock and bus width: a data-centre GPU's 0.3-20 TB/s.
  EXPECT_GT(d.memory_bandwidth, std::int64_t{300'000'000'000});
  EXPECT_LT(d.memory_bandwidth, std::int64_t{20'000'000'000'000});
  EXPECT_GE(d.smem_optin_per_block, 48 * 1024);
  EXPECT_GE(d.smem_per_sm, d.smem_optin_per_block);
  EXPECT_GE(d.regs_per_block, 32 * 1024);
  EXPECT_GE(d.regs_per_sm, d.regs_per_block);
  EXPECT_GE(d.max_threads_per_block, 512);
  EXPECT_GE(d.max_threads_per_sm, d.max_threads_per_block);
  EXPECT_GE(d.driver_version, 12000);
  EXPECT_EQ(d.nvrtc_version, Compiler::nvrtc_version());
  EXPECT_EQ(d.arch().rfind("sm_", 0), 0u);
  EXPECT_EQ(d.key(), query_device(0).key());  // stable
}

TEST(Device, BadOrdinalIsNamed) {
  KTUNE_REQUIRE_GPU();
  const int n = device_count();
  try {
    query_device(n);
    FAIL();
  } catch (const NoDevice& e) {
    EXPECT_TRUE(contains(e.what(), "no CUDA device " + std::to_string(n))) << e.what();
  }
  EXPECT_THROW(query_device(-1), NoDevice);
}

TEST(Device, ContextAndMemoryRoundTrip) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  ensure_context(0);  // keeps the current context
  const Driver& d = Driver::get();
  std::vector<int> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i * 3);
  DeviceBuffer a(host.size() * sizeof(int));
  DeviceBuffer b(host.size() * sizeof(int));
  EXPECT_NE(a.get(), 0u);
  KTUNE_CU(d.cuMemcpyHtoD(a.get(), host.data(), a.size()));
  KTUNE_CU(d.cuMemcpyDtoDAsync(b.get(), a.get(), a.size(), nullptr));
  KTUNE_CU(d.cuCtxSynchronize());
  std::vector<int> back(host.size());
  KTUNE_CU(d.cuMemcpyDtoH(back.data(), b.get(), b.size()));
  EXPECT_EQ(back, host);
  DeviceBuffer c(std::move(a));
  EXPECT_EQ(a.get(), 0u);
  EXPECT_NE(c.get(), 0u);
}

TEST(Device, CorruptCubinIsACudaErrorNotACrash) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  EXPECT_THROW(Module{std::string(256, '\x7f')}, CudaError);
}

}  // namespace
}  // namespace ktune
