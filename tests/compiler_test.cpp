// NVRTC front end, ptxas resource parsing, the on-disk CUBIN cache and the compile pool.
// Runs without a GPU; the launch tests at the end skip when there is none.
#include "runtime/core/compiler.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/launcher.hpp"
#include "templates/embedded.hpp"
#include "tests/support/test_env.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;

// On a machine with a CUDA driver, NVRTC reuses SASS from the driver's compute cache for PTX it
// has seen before and then returns no ptxas log, so resources would read 0. These tests check
// what NVRTC reports, so they compile without that cache (set before NVRTC first runs).
const int kNoDriverCache = ::setenv("CUDA_CACHE_DISABLE", "1", 1);

// A fresh private directory, removed with everything in it at the end of the test.
class Scratch {
 public:
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "ktune-compiler-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return ~0u;
  return st.st_mode & 07777;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr const char* kAxpy = R"(
#ifndef KTUNE_NVRTC
#error "KTUNE_NVRTC is not defined"
#endif
namespace test {
struct AxpyArgs {
  float* y;
  const float* x;
  float a;
  int n;
};
template <int kBlock>
__global__ void __launch_bounds__(kBlock) axpy(const __grid_constant__ AxpyArgs args) {
  static_assert(kBlock % 32 == 0, "block must be whole warps");
  const int i = blockIdx.x * kBlock + threadIdx.x;
  if (i < args.n) args.y[i] = args.a * args.x[i] + args.y[i];
}
}  // namespace test
)";

CompileJob axpy_job(const std::string& arch, int block = 128) {
  CompileJob job;
  job.arch = arch;
  job.source.name_expression = "test::axpy<" + std::to_string(block) + ">";
  job.source_text = kAxpy;
  return job;
}

CompileJob text_job(const std::string& text, const std::string& name,
                    const std::string& arch = "sm_80") {
  CompileJob job;
  job.arch = arch;
  job.source.name_expression = name;
  job.source_text = text;
  return job;
}

// ---- compiling ----

TEST(Compiler, CompilesForSm80AndSm90a) {
  const Compiler compiler(std::nullopt);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const CompiledKernel k = compiler.compile(axpy_job(arch));
    EXPECT_EQ(k.lowered_name, "_ZN4test4axpyILi128EEEvNS_8AxpyArgsE") << arch;
    EXPECT_FALSE(k.cubin.empty()) << arch;
    EXPECT_EQ(k.cubin.compare(0, 4, "\x7f" "ELF"), 0) << arch;  // CUBIN is an ELF image
    EXPECT_GT(k.resources.registers, 0) << arch << "\n" << k.log;
    EXPECT_EQ(k.resources.local_bytes, 0) << arch;
    EXPECT_FALSE(k.from_cache);
    EXPECT_GT(k.seconds, 0.0);
    EXPECT_TRUE(contains(k.log, "Compiling entry function")) << k.log;
  }
}

TEST(Compiler, StaticSharedMemoryIsReported) {
  const Compiler compiler(std::nullopt);
  const CompiledKernel k = compiler.compile(text_job(R"(
__global__ void other(float* a) { a[0] = 1.0f; }
__global__ void tile(float* a) {
  __shared__ float t[1024];
  t[threadIdx.x] = a[threadIdx.x];
  __syncthreads();
  a[threadIdx.x] = t[1023 - threadIdx.x];
})", "tile"));
  EXPECT_EQ(k.resources.shared_bytes, 4096) << k.log;
  EXPECT_GT(k.resources.registers, 0);
}

TEST(Compiler, LocalArrayReportsStackFrame) {
  const Compiler compiler(std::nullopt);
  const CompiledKernel k = compiler.compile(text_job(R"(
__global__ void spill(float* out, const int* idx, int n) {
  float local[512];
  for (int i = 0; i < 512; ++i) local[i] = out[i * n];
  out[threadIdx.x] = local[idx[threadIdx.x] & 511];
})", "spill", "sm_90a"));
  EXPECT_GE(k.resources.local_bytes, 2048) << k.log;
  EXPECT_GE(k.resources.spill_stores, 0);
  EXPECT_GE(k.resources.spill_loads, 0);
}

TEST(Compiler, RegisterPressureReportsSpills) {
  const Compiler compiler(std::nullopt);
  const CompiledKernel k = compiler.compile(text_job(R"(
__global__ void __maxnreg__(24) pressure(float* out, const float* in, int n) {
  float acc[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) acc[j] = in[j * n + threadIdx.x];
  for (int i = 1; i < n; ++i) {
#pragma unroll
    for (int j = 0; j < 32; ++j) acc[j] = acc[j] * in[i + j] + acc[(j + 1) % 32];
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) s += acc[j];
  out[threadIdx.x] = s;
})", "pressure"));
  EXPECT_LE(k.resources.registers, 24) << k.log;
  EXPECT_GT(k.resources.spill_stores, 0) << k.log;
  EXPECT_GT(k.resources.spill_loads, 0) << k.log;
  EXPECT_GT(k.resources.local_bytes, 0) << k.log;
}

TEST(Compiler, SyntaxErrorCarriesTheLog) {
  const Compiler compiler(std::nullopt);
  try {
    compiler.compile(text_job("__global__ void broken(int* p) { p[0] = ; }\n", "broken", "sm_90a"));
    FAIL() << "no CompileError";
  } catch (const CompileError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "broken")) << m;
    EXPECT_TRUE(contains(m, "sm_90a")) << m;
    EXPECT_TRUE(contains(m, "error")) << m;
    EXPECT_TRUE(contains(e.log(), "error")) << e.log();
    EXPECT_TRUE(contains(e.log(), "ktune_main.cu(1)")) << e.log();
  }
}

TEST(Compiler, StaticAssertFailureIsACompileError) {
  const Compiler compiler(std::nullopt);
  CompileJob job = axpy_job("sm_80", 100);  // not a multiple of 32
  try {
    compiler.compile(job);
    FAIL() << "no CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "test::axpy<100>")) << e.what();
    EXPECT_TRUE(contains(e.log(), "block must be whole warps")) << e.log();
  }
}

TEST(Compiler, UnknownNameExpressionIsACompileError) {
  const Compiler compiler(std::nullopt);
  CompileJob job = axpy_job("sm_80");
  job.source.name_expression = "test::nothere<1>";
  EXPECT_THROW(compiler.compile(job), CompileError);
}

TEST(Compiler, BadTargetsAreRefused) {
  const Compiler compiler(std::nullopt);
  for (const char* arch : {"", "sm", "sm_", "90a", "sm_90 -G", "sm_90ab", "compute_90", "sm_9x"}) {
    EXPECT_THROW(compiler.compile(axpy_job(arch)), InvalidArgument) << arch;
    EXPECT_THROW(compiler.cache_key(axpy_job(arch)), InvalidArgument) << arch;
  }
  // Well-formed but unknown to NVRTC: its own error, as a CompileError.
  EXPECT_THROW(compiler.compile(axpy_job("sm_15")), CompileError);
  CompileJob nothing;
  nothing.arch = "sm_80";
  nothing.source.name_expression = "k";
  EXPECT_THROW(compiler.compile(nothing), InvalidArgument);
  nothing.source_text = "__global__ void k() {}";
  nothing.source.name_expression.clear();
  EXPECT_THROW(compiler.compile(nothing), InvalidArgument);
}

TEST(Compiler, EmbeddedHeadersAreIncludable) {
  ASSERT_NE(find_embedded("common/types.cuh"), nullptr);
  const Compiler compiler(std::nullopt);
  const CompiledKernel k = compiler.compile(text_job(R"(
#include "common/types.cuh"
template <typename T>
__global__ void widen(const T* in, float* out) { out[threadIdx.x] = ktune::to_float(in[threadIdx.x]); }
)", "widen<ktune::bf16>", "sm_90a"));
  EXPECT_TRUE(contains(k.lowered_name, "widen")) << k.lowered_name;
  EXPECT_FALSE(k.cubin.empty());
}

TEST(Compiler, MissingHeaderIsNamed) {
  const Compiler compiler(std::nullopt);
  try {
    compiler.compile(text_job("#include \"nope/missing.cuh\"\n__global__ void k() {}\n", "k"));
    FAIL() << "no CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "nope/missing.cuh")) << e.log();
    EXPECT_TRUE(contains(e.what(), "nope/missing.cuh")) << e.what();
  }
}

TEST(Compiler, SourceFileJobIncludesTheEmbeddedFile) {
  // A file that is not embedded: the NVRTC error names it.
  CompileJob job;
  job.arch = "sm_80";
  job.source.file = "nope/kernel.cuh";
  job.source.name_expression = "k";
  try {
    Compiler(std::nullopt).compile(job);
    FAIL() << "no CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "from nope/kernel.cuh")) << e.what();
    EXPECT_TRUE(contains(e.log(), "nope/kernel.cuh")) << e.log();
  }
}

TEST(Compiler, NvrtcVersion) {
  const int v = Compiler::nvrtc_version();
  EXPECT_GE(v, 12000);
  EXPECT_EQ(v % 10, 0);
}

// ---- cache key ----

TEST(CacheKey, ChangesWithEveryInput) {
  const Compiler compiler(std::nullopt);
  const CompileJob base = axpy_job("sm_90a");
  const std::string key = compiler.cache_key(base);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, compiler.cache_key(base));
  EXPECT_EQ(key, Compiler(std::nullopt).cache_key(base));

  EXPECT_NE(key, compiler.cache_key(axpy_job("sm_80")));
  EXPECT_NE(key, compiler.cache_key(axpy_job("sm_90")));
  EXPECT_NE(key, compiler.cache_key(axpy_job("sm_90a", 256)));
  CompileJob byte = base;
  byte.source_text[byte.source_text.size() / 2] ^= 1;
  EXPECT_NE(key, compiler.cache_key(byte));
  CompileJob extra = base;
  extra.source_text += " ";
  EXPECT_NE(key, compiler.cache_key(extra));

  CompileJob a;
  a.arch = "sm_80";
  a.source.file = "fused/norm.cuh";
  a.source.name_expression = "k";
  CompileJob b = a;
  b.source.file = "fused/softmax.cuh";
  EXPECT_NE(compiler.cache_key(a), compiler.cache_key(b));
}

// ---- disk cache ----

TEST(Cache, SecondCompileIsFromCacheAndIdentical) {
  Scratch tmp;
  const Compiler compiler(tmp.path() / "cache");
  ASSERT_TRUE(compiler.cache_dir().has_value()) << compiler.cache_disabled_reason();
  const CompileJob job = axpy_job("sm_90a");
  const CompiledKernel first = compiler.compile(job);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(fs::is_regular_file(tmp.path() / "cache" / (compiler.cache_key(job) + ".cubin")));

  const CompiledKernel second = compiler.compile(job);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.lowered_name, first.lowered_name);
  EXPECT_EQ(second.resources.registers, first.resources.registers);
  EXPECT_EQ(second.resources.local_bytes, first.resources.local_bytes);
  EXPECT_EQ(second.log, first.log);
  EXPECT_EQ(second.seconds, 0.0);

  // Another Compiler on the same directory (another process, in effect) hits too.
  const CompiledKernel third = Compiler(tmp.path() / "cache").compile(job);
  EXPECT_TRUE(third.from_cache);
  EXPECT_EQ(third.cubin, first.cubin);

  // A different target is a different entry.
  EXPECT_FALSE(compiler.compile(axpy_job("sm_80")).from_cache);
}

TEST(Cache, CorruptEntriesAreIgnoredAndRebuilt) {
  Scratch tmp;
  const Compiler compiler(tmp.path());
  const CompileJob job = axpy_job("sm_80");
  const CompiledKernel original = compiler.compile(job);
  const fs::path entry = tmp.path() / (compiler.cache_key(job) + ".cubin");
  const std::string good = read_bytes(entry);
  ASSERT_GT(good.size(), original.cubin.size());

  auto flipped = [&](std::size_t at) {
    std::string s = good;
    s[at] = static_cast<char>(s[at] ^ 0x20);
    return s;
  };
  const std::vector<std::pair<std::string, std::string>> corruptions = {
      {"magic byte flipped", flipped(0)},
      {"header byte flipped", flipped(20)},
      {"middle byte flipped", flipped(good.size() / 2)},
      {"last byte flipped", flipped(good.size() - 1)},
      {"truncated to half", good.substr(0, good.size() / 2)},
      {"truncated by one", good.substr(0, good.size() - 1)},
      {"empty", ""},
      {"trailing garbage", good + "x"},
  };
  for (const auto& [what, bytes] : corruptions) {
    write_bytes(entry, bytes);
    const CompiledKernel k = compiler.compile(job);
    EXPECT_FALSE(k.from_cache) << what;
    EXPECT_EQ(k.cubin, original.cubin) << what;
    EXPECT_EQ(k.lowered_name, original.lowered_name) << what;
    // The rebuild overwrote the bad entry.
    EXPECT_TRUE(compiler.compile(job).from_cache) << what;
  }
}

TEST(Cache, PlantedEntriesWithWrongHashOrKeyAreIgnored) {
  Scratch tmp;
  const Compiler compiler(tmp.path());
  const CompileJob victim = axpy_job("sm_90a", 64);
  const CompileJob other = text_job("__global__ void planted(int* p) { *p = 42; }", "planted",
                                    "sm_90a");
  const CompiledKernel other_kernel = compiler.compile(other);
  const std::string other_entry = read_bytes(tmp.path() / (compiler.cache_key(other) + ".cubin"));
  const fs::path victim_entry = tmp.path() / (compiler.cache_key(victim) + ".cubin");

  // A valid entry of another kernel, renamed to the victim's key.
  write_bytes(victim_entry, other_entry);
  CompiledKernel k = compiler.compile(victim);
  EXPECT_FALSE(k.from_cache);
  EXPECT_EQ(k.lowered_name, "_ZN4test4axpyILi64EEEvNS_8AxpyArgsE");
  EXPECT_NE(k.cubin, other_kernel.cubin);

  // The victim's own entry with its payload swapped for the other CUBIN; the stored hash is
  // left as it was.
  const std::string genuine = read_bytes(victim_entry);
  const std::size_t at = genuine.find(k.cubin);
  ASSERT_NE(at, std::string::npos);
  std::string forged = genuine.substr(0, at) + other_kernel.cubin;
  forged.resize(genuine.size(), '\0');
  write_bytes(victim_entry, forged);
  k = compiler.compile(victim);
  EXPECT_FALSE(k.from_cache);
  EXPECT_NE(k.cubin, other_kernel.cubin);

  // Arbitrary bytes under the right name.
  write_bytes(victim_entry, std::string(4096, '\x7f'));
  EXPECT_FALSE(compiler.compile(victim).from_cache);
  EXPECT_TRUE(compiler.compile(victim).from_cache);
}

TEST(Cache, ConcurrentCompilesOfOneKernelBuildItOnce) {
  Scratch tmp;
  const Compiler compiler(tmp.path());
  const std::vector<CompileJob> jobs(4, axpy_job("sm_80", 96));
  const auto outcomes = compile_parallel(compiler, jobs, 2);
  int built = 0;
  for (const CompileOutcome& o : outcomes) {
    ASSERT_TRUE(o.kernel.has_value()) << o.error;
    if (!o.kernel->from_cache) ++built;
    EXPECT_EQ(o.kernel->cubin, outcomes[0].kernel->cubin);
  }
  EXPECT_EQ(built, 1);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp.")) << e.path();
  }
}

TEST(Cache, DirectoryRemovedAfterwardsOnlyCostsTheCache) {
  Scratch tmp;
  const Compiler compiler(tmp.path() / "gone");
  ASSERT_TRUE(compiler.cache_dir().has_value());
  fs::remove_all(tmp.path() / "gone");
  const CompiledKernel k = compiler.compile(axpy_job("sm_80"));
  EXPECT_FALSE(k.from_cache);
  EXPECT_FALSE(k.cubin.empty());
}

// Runs `fn` on another thread. If it has not returned within `limit`, it is taken to be blocked
// in open() on one of `fifos`: they are opened for writing (non-blocking) again and again, which
// releases such an open(), until `fn` returns. Returns false when that was needed, so that a
// regression fails the test instead of hanging it.
bool returns_within(std::chrono::seconds limit, const std::vector<fs::path>& fifos,
                    const std::function<void()>& fn) {
  std::future<void> done = std::async(std::launch::async, fn);
  if (done.wait_for(limit) == std::future_status::ready) {
    done.get();
    return true;
  }
  while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    for (const fs::path& f : fifos) {
      const int fd = ::open(f.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
    }
  }
  done.get();
  return false;
}

TEST(Cache, FifoPlantedAsEntryOrLockDoesNotBlock) {
  Scratch tmp;
  const Compiler compiler(tmp.path());
  ASSERT_TRUE(compiler.cache_dir().has_value()) << compiler.cache_disabled_reason();
  const CompileJob job = axpy_job("sm_80", 160);
  const std::string key = compiler.cache_key(job);
  const fs::path entry = tmp.path() / (key + ".cubin");
  const fs::path lock = tmp.path() / (key + ".lock");
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
  const CompiledKernel reference = Compiler(std::nullopt).compile(job);

  CompiledKernel k;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(returns_within(std::chrono::seconds(30), {entry, lock},
                             [&] { k = compiler.compile(job); }))
      << "compile blocked on a FIFO in the cache";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_FALSE(k.from_cache);
  EXPECT_EQ(k.cubin, reference.cubin);
  EXPECT_EQ(k.lowered_name, reference.lowered_name);
  // Again: the entry was replaced by a real one (a rename over the FIFO); the lock is still one.
  EXPECT_TRUE(returns_within(std::chrono::seconds(30), {entry, lock},
                             [&] { k = compiler.compile(job); }));
  EXPECT_EQ(k.cubin, reference.cubin);
}

TEST(CacheDir, CreatedWithOwnerOnlyMode) {
  Scratch tmp;
  const fs::path dir = tmp.path() / "a" / "b" / "ktune";
  const Compiler compiler(dir);
  ASSERT_TRUE(compiler.cache_dir().has_value()) << compiler.cache_disabled_reason();
  EXPECT_EQ(*compiler.cache_dir(), dir);
  EXPECT_TRUE(compiler.cache_disabled_reason().empty());
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(tmp.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(tmp.path() / "a" / "b"), 0700u);
  // And used.
  const CompileJob job = axpy_job("sm_80");
  EXPECT_FALSE(compiler.compile(job).from_cache);
  EXPECT_TRUE(fs::is_regular_file(dir / (compiler.cache_key(job) + ".cubin")));
  EXPECT_TRUE(compiler.compile(job).from_cache);
}

// A directory ktune did not create is never chmod-ed: KTUNE_CACHE_DIR=/tmp must not lock other
// users out of /tmp. Shared ones are not used; compiling goes on in memory.
TEST(CacheDir, SharedDirIsLeftAloneAndNotUsed) {
  for (const unsigned mode : {01777u, 0777u, 0775u, 02770u, 0733u}) {
    Scratch tmp;
    const fs::path dir = tmp.path() / "shared";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    const Compiler compiler(dir);
    EXPECT_EQ(mode_of(dir), mode) << std::oct << mode << ": the mode was changed";
    EXPECT_FALSE(compiler.cache_dir().has_value()) << std::oct << mode;
    const std::string why = compiler.cache_disabled_reason();
    EXPECT_TRUE(contains(why, "\"" + dir.string() + "\"")) << why;
    EXPECT_TRUE(contains(why, "writable by group or others")) << why;
    EXPECT_FALSE(contains(why, "\n")) << why;
    const CompiledKernel k = compiler.compile(axpy_job("sm_80"));
    EXPECT_FALSE(k.from_cache);
    EXPECT_FALSE(k.cubin.empty());
    EXPECT_TRUE(fs::is_empty(dir)) << "nothing is written to a directory that is not used";
    EXPECT_EQ(mode_of(dir), mode) << std::oct << mode;
  }
}

TEST(CacheDir, SymlinkIsJudgedByItsTarget) {
  Scratch tmp;
  const fs::path shared = tmp.path() / "shared";
  const fs::path mine = tmp.path() / "mine";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  fs::create_directory_symlink(shared, tmp.path() / "to-shared");
  fs::create_directory_symlink(mine, tmp.path() / "to-mine");

  const Compiler refused(tmp.path() / "to-shared");
  EXPECT_FALSE(refused.cache_dir().has_value());
  EXPECT_TRUE(contains(refused.cache_disabled_reason(), "to-shared"))
      << refused.cache_disabled_reason();
  EXPECT_EQ(mode_of(shared), 01777u);
  refused.compile(axpy_job("sm_80"));
  EXPECT_TRUE(fs::is_empty(shared));

  const Compiler used(tmp.path() / "to-mine");
  ASSERT_TRUE(used.cache_dir().has_value()) << used.cache_disabled_reason();
  EXPECT_FALSE(used.compile(axpy_job("sm_80")).from_cache);
  EXPECT_TRUE(fs::is_regular_file(mine / (used.cache_key(axpy_job("sm_80")) + ".cubin")));
}

TEST(CacheDir, PrivateExistingDirIsUsedAsItIs) {
  for (const unsigned mode : {0700u, 0755u, 02750u}) {
    Scratch tmp;
    const fs::path dir = tmp.path() / "private";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    const Compiler compiler(dir);
    ASSERT_TRUE(compiler.cache_dir().has_value()) << compiler.cache_disabled_reason();
    EXPECT_FALSE(compiler.compile(axpy_job("sm_80")).from_cache);
    EXPECT_TRUE(compiler.compile(axpy_job("sm_80")).from_cache);
    EXPECT_EQ(mode_of(dir), mode) << std::oct << mode;
  }
}

TEST(CacheDir, ReasonIsOneLineWhateverTheName) {
  Scratch tmp;
  const fs::path dir = tmp.path() / "two\nlines\x1b[2J";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const Compiler compiler(dir);
  EXPECT_FALSE(compiler.cache_dir().has_value());
  const std::string why = compiler.cache_disabled_reason();
  EXPECT_FALSE(contains(why, "\n")) << why;
  EXPECT_FALSE(contains(why, "\x1b")) << why;
  EXPECT_TRUE(contains(why, "two\\nlines")) << why;
}

TEST(CacheDir, DirOwnedBySomeoneElseIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  Scratch tmp;
  const fs::path dir = tmp.path() / "theirs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  const Compiler compiler(dir);
  EXPECT_FALSE(compiler.cache_dir().has_value());
  EXPECT_TRUE(contains(compiler.cache_disabled_reason(), "owned by uid 65534"))
      << compiler.cache_disabled_reason();
  // Compiling still works, without the cache.
  EXPECT_FALSE(compiler.compile(axpy_job("sm_80")).from_cache);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(CacheDir, FileInTheWayDisablesTheCache) {
  Scratch tmp;
  write_bytes(tmp.path() / "file", "x");
  const Compiler compiler(tmp.path() / "file");
  EXPECT_FALSE(compiler.cache_dir().has_value());
  EXPECT_TRUE(contains(compiler.cache_disabled_reason(), "not a directory"))
      << compiler.cache_disabled_reason();
  const Compiler below(tmp.path() / "file" / "sub");
  EXPECT_FALSE(below.cache_dir().has_value());
  EXPECT_FALSE(below.cache_disabled_reason().empty());
  // A FIFO as the directory: refused at once, never opened for reading.
  ASSERT_EQ(::mkfifo((tmp.path() / "fifo").c_str(), 0600), 0);
  bool refused = false;
  EXPECT_TRUE(returns_within(std::chrono::seconds(30), {tmp.path() / "fifo"}, [&] {
    refused = !Compiler(tmp.path() / "fifo").cache_dir().has_value();
  }));
  EXPECT_TRUE(refused);
}

TEST(CacheDir, NoDirectoryMeansNoCache) {
  const Compiler compiler(std::nullopt);
  EXPECT_FALSE(compiler.cache_dir().has_value());
  EXPECT_FALSE(compiler.cache_disabled_reason().empty());
}

// Sets an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CacheDir, DefaultDirectoryOrder) {
  EnvVar home("HOME", "/home/someone");
  {
    EnvVar k("KTUNE_CACHE_DIR", "/tmp/explicit");
    EnvVar x("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(Compiler::default_cache_dir(), fs::path("/tmp/explicit"));
  }
  {
    EnvVar k("KTUNE_CACHE_DIR", "");
    EnvVar x("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(Compiler::default_cache_dir(), fs::path("/tmp/xdg/ktune"));
  }
  {
    EnvVar k("KTUNE_CACHE_DIR", nullptr);
    EnvVar x("XDG_CACHE_HOME", "relative/xdg");  // invalid per the XDG spec: ignored
    EXPECT_EQ(Compiler::default_cache_dir(), fs::path("/home/someone/.cache/ktune"));
  }
}

// ---- compile pool ----

TEST(CompileParallel, OutcomesInJobOrderWithOneFailure) {
  const Compiler compiler(std::nullopt);
  std::vector<CompileJob> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(axpy_job(i % 2 == 0 ? "sm_80" : "sm_90a", 32 * (i + 1)));
  jobs[5] = text_job("__global__ void bad(int* p) { p[0] = ; }", "bad");
  std::vector<int> seen(jobs.size(), 0);
  int calls = 0;  // only touched under compile_parallel's on_done lock
  const auto outcomes = compile_parallel(compiler, jobs, 2, [&](std::size_t i) {
    ++calls;
    ++seen.at(i);
  });
  ASSERT_EQ(outcomes.size(), jobs.size());
  EXPECT_EQ(calls, 8);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(seen[i], 1) << i;
    if (i == 5) {
      EXPECT_FALSE(outcomes[i].kernel.has_value());
      EXPECT_TRUE(contains(outcomes[i].error, "bad for sm_80")) << outcomes[i].error;
      EXPECT_TRUE(contains(outcomes[i].error, "\n")) << outcomes[i].error;  // message + log
      EXPECT_TRUE(contains(outcomes[i].error, "ktune_main.cu(1)")) << outcomes[i].error;
      continue;
    }
    ASSERT_TRUE(outcomes[i].kernel.has_value()) << i << ": " << outcomes[i].error;
    EXPECT_TRUE(outcomes[i].error.empty());
    EXPECT_TRUE(contains(outcomes[i].kernel->lowered_name,
                         "axpyILi" + std::to_string(32 * (i + 1)) + "E"))
        << i << ": " << outcomes[i].kernel->lowered_name;
  }
}

TEST(CompileParallel, EmptyBatchAndDefaultThreads) {
  const Compiler compiler(std::nullopt);
  EXPECT_TRUE(compile_parallel(compiler, {}, 0).empty());
  const auto one = compile_parallel(compiler, {axpy_job("sm_80")}, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].kernel.has_value()) << one[0].error;
}

TEST(CompileParallel, InvalidJobBecomesAnErrorOutcome) {
  const Compiler compiler(std::nullopt);
  const auto out = compile_parallel(compiler, {axpy_job("sm_90 -G")}, 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].kernel.has_value());
  EXPECT_TRUE(contains(out[0].error, "sm_90 -G")) << out[0].error;
}

TEST(CompileParallel, CallbackExceptionReachesTheCaller) {
  const Compiler compiler(std::nullopt);
  const std::vector<CompileJob> jobs(3, axpy_job("sm_80"));
  EXPECT_THROW(compile_parallel(compiler, jobs, 2,
                                [](std::size_t) { throw std::runtime_error("stop"); }),
               std::runtime_error);
}

// ---- on a GPU: the compiled kernel loads and runs; a fault is reported, never fatal ----


struct AxpyArgs {
  CUdeviceptr y;
  CUdeviceptr x;
  float a;
  int n;
};

TEST(CompilerGpu, CompiledKernelLaunches) {
  KTUNE_REQUIRE_GPU();
  ensure_context(0);
  const DeviceInfo device = query_device(0);
  const CompiledKernel k = Compiler(std::nullopt).compile(axpy_job(device.arch()));
  const Module module(k.cubin);
  const CUfunction f = module.function(k.lowered_name);
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  const Driver& d = Driver::get();
  KTUNE_CU(d.cuMemcpyHtoD(dx.get(), x.data(), dx.size()));
  KTUNE_CU(d.cuMemcpyHtoD(dy.get(), y.data(), dy.size()));
  const AxpyArgs args{dy.get(), dx.get(), 2.0f, n};
  KernelLaunch l;
  l.kernel = f;
  l.grid[0] = (n + 127) / 128;
  l.block[0] = 128;
  l.args = &args;
  l.args_size = sizeof args;
  CudaLauncher launcher(nullptr);
  launcher.launch(l);
  KTUNE_CU(d.cuCtxSynchronize());
  KTUNE_CU(d.cuMemcpyDtoH(y.data(), dy.get(), dy.size()));
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * static_cast<float>(i) + 1.0f) << i;
}

// The fault poisons the context, so it runs in a child process (a death test).
void fault_and_check() {
  ensure_context(0);
  const DeviceInfo device = query_device(0);
  const CompiledKernel k = Compiler(std::nullopt).compile(text_job(
      "struct Args { int* p; };\n"
      "__global__ void fault(const __grid_constant__ Args a) { a.p[threadIdx.x] = 1; }\n",
      "fault", device.arch()));
  const Module module(k.cubin);
  const struct {
    CUdeviceptr p;
  } args{8};  // not a valid device address
  KernelLaunch l;
  l.kernel = module.function(k.lowered_name);
  l.block[0] = 32;
  l.args = &args;
  l.args_size = sizeof args;
  try {
    CudaLauncher(nullptr).launch(l);
    KTUNE_CU(Driver::get().cuCtxSynchronize());
  } catch (const CudaError& e) {
    const std::string m = e.what();
    std::_Exit(e.sticky() && contains(m, "the CUDA context is unusable") ? 0 : 2);
  }
  std::_Exit(3);
}

TEST(CompilerGpu, FaultIsReportedAsStickyCudaError) {
  KTUNE_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fault_and_check(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ktune
