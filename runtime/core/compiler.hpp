// NVRTC wrapper and compile pool. The only file that includes nvrtc.h is compiler.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
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
  /// Builds one kernel on a cache miss, in place of NVRTC in this process (the tuner's runs
  /// NVRTC in a child process under a time limit). Returns what an in-process compile returns
  /// or throws what it throws (CompileError with the log; CompileTimeout past a limit).
  using Builder = std::function<CompiledKernel(const CompileJob&)>;

  /// `cache_dir`: nullopt disables the disk cache. Missing directories are created with mode
  /// 0700. The mode of an existing directory is never changed: one that is not a directory, is
  /// owned by someone else, is writable by group or others, or is a symlink to such, is not
  /// used (the cache is disabled and cache_disabled_reason() says why). The directory is opened
  /// once here and every entry is read and written relative to that handle.
  /// `builder`: empty compiles with NVRTC in this process. Cache hits never call it.
  explicit Compiler(std::optional<std::filesystem::path> cache_dir = default_cache_dir(),
                    Builder builder = {});

  /// Compiles (or loads from cache) one kernel. Throws CompileError carrying the log,
  /// InvalidArgument for a malformed job, and whatever the builder throws.
  CompiledKernel compile(const CompileJob& job) const;

  /// Cache key: hash of source + all embedded headers + options + NVRTC version + target + ktune
  /// version. Exposed for tests.
  std::string cache_key(const CompileJob& job) const;

  const std::optional<std::filesystem::path>& cache_dir() const { return cache_dir_; }
  /// Why the disk cache is off, when it is: one line naming the directory and the reason, for a
  /// warning or a log. Empty while the cache is in use.
  const std::string& cache_disabled_reason() const { return cache_disabled_reason_; }

  /// major*1000 + minor*10, e.g. 13000 for NVRTC 13.0.
  static int nvrtc_version();
  /// $KTUNE_CACHE_DIR, else $XDG_CACHE_HOME/ktune, else ~/.cache/ktune; nullopt if none resolves.
  static std::optional<std::filesystem::path> default_cache_dir();

 private:
  struct OpenDir;  // the cache directory's descriptor, shared by copies

  std::optional<std::filesystem::path> cache_dir_;
  std::shared_ptr<const OpenDir> dir_;
  std::string cache_disabled_reason_;
  Builder builder_;
};

/// Result of one job in a batch: the kernel, or the compile error message with its log.
struct CompileOutcome {
  std::optional<CompiledKernel> kernel;
  std::string error;       // message + log when kernel is empty
  bool timed_out = false;  // the error is a CompileTimeout
};

/// Compiles `jobs` on `threads` threads (0: number of cores). `on_done(i)` is called (from a
/// worker thread, serialised) as each job finishes. Outcomes are in job order.
std::vector<CompileOutcome> compile_parallel(const Compiler& compiler,
                                             const std::vector<CompileJob>& jobs, int threads,
                                             const std::function<void(std::size_t)>& on_done = {});

}  // namespace ktune
