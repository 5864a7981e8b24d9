// NVRTC wrapper and compile pool. The only file that includes nvrtc.h is compiler.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "templates/op.hpp"

namespace ktune {

/// Output of compiling one kernel instantiation.
struct CompiledKernel {
  std::string lowered_name;    // mangled name to look up in the module
  std::string cubin;           // CUBIN bytes for the exact target
  KernelResources resources;   // from ptxas -v
  std::string log;             // compiler output
  bool from_cache = false;
  double seconds = 0.0;        // wall time of the compile (0 for a cache hit)
};

/// One compile job: an embedded file, a name expression and an exact target such as "sm_90a".
struct CompileJob {
  KernelSource source;
  std::string arch;
  std::string source_text;  // when non-empty, compiled instead of `#include "<source.file>"`
                            // (tests and planted kernels); embedded headers stay includable
};

/// Thread-safe NVRTC front end with an optional on-disk cache of CUBINs.
class Compiler {
 public:
  /// `cache_dir`: nullopt disables the disk cache. The directory is created with mode 0700; a
  /// directory owned by someone else or writable by others is refused (the cache is disabled).
  explicit Compiler(std::optional<std::filesystem::path> cache_dir = default_cache_dir());

  /// Compiles (or loads from cache) one kernel. Throws CompileError carrying the log.
  CompiledKernel compile(const CompileJob& job) const;

  /// Cache key: hash of source + all embedded headers + options + NVRTC version + target + ktune
  /// version. Exposed for tests.
  std::string cache_key(const CompileJob& job) const;

  const std::optional<std::filesystem::path>& cache_dir() const { return cache_dir_; }
  /// Why the disk cache is off, when it is.
  const std::string& cache_disabled_reason() const { return cache_disabled_reason_; }

  /// major*1000 + minor*10, e.g. 13000 for NVRTC 13.0.
  static int nvrtc_version();
  /// $KTUNE_CACHE_DIR, else $XDG_CACHE_HOME/ktune, else ~/.cache/ktune; nullopt if none resolves.
  static std::optional<std::filesystem::path> default_cache_dir();

 private:
  std::optional<std::filesystem::path> cache_dir_;
  std::string cache_disabled_reason_;
};

/// Result of one job in a batch: the kernel, or the compile error message with its log.
struct CompileOutcome {
  std::optional<CompiledKernel> kernel;
  std::string error;  // message + log when kernel is empty
};

/// Compiles `jobs` on `threads` threads (0: number of cores). `on_done(i)` is called (from a
/// worker thread, serialised) as each job finishes. Outcomes are in job order.
std::vector<CompileOutcome> compile_parallel(const Compiler& compiler,
                                             const std::vector<CompileJob>& jobs, int threads,
                                             const std::function<void(std::size_t)>& on_done = {});

}  // namespace ktune
