// ktune C++ API: tuned kernels, dispatched from the tuning databases.
//
// Pointers are CUDA device addresses and `stream` a CUstream (nullptr: legacy default stream).
// Calls run on the device of the current CUDA context (the primary context of device 0 when
// there is none). The first call for a problem plans it: database lookup, then compile or cache
// load; later calls only launch (no database query, no allocation, no compile). Thread-safe.
// Errors are thrown as ktune::Error subclasses (ktune/error.hpp); nothing is printed unless
// KTUNE_LOG is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ktune/dtype.hpp"
#include "ktune/error.hpp"

namespace ktune {

using Stream = void*;

/// How a configuration was found.
enum class Match : int { exact = 0, nearest_shape = 1, other_device = 2, default_config = 3 };
const char* match_kind_name(Match m);

/// What the runtime dispatches for one (device, op, dtype, problem).
struct MatchInfo {
  Match kind = Match::default_config;
  std::string op;
  std::string problem;          // the problem asked for, canonical key
  std::string params;           // the configuration dispatched
  std::string tuned_problem;    // the problem it was tuned on (empty for defaults)
  std::string tuned_device;     // the device key it was tuned on (empty for defaults)
  std::string database;         // the database it came from (empty for defaults)
  double tuned_us = 0.0;        // its measured median time (0 for defaults)
};

/// One database the runtime consults, and what became of it.
struct DatabaseStatus {
  enum class State : int {
    loaded = 0,   // opened and consulted
    missing = 1,  // no file there (the user's database before the first sweep): not an error
    refused = 2   // not used at all: not a regular file, corrupt, foreign, newer schema...
  };
  std::string path;
  State state = State::missing;
  std::string reason;                     // why it is missing or refused; empty when loaded
  std::vector<std::string> errors;        // queries that failed on a loaded database, with why;
                                          // it stays in use for the others
  std::vector<std::string> skipped_rows;  // rows lookups skip, each with its reason (the first
                                          // 100: found by lookups so far, and by status())
  std::size_t skipped_count = 0;          // all skipped rows, listed or not
};
/// "loaded", "missing" or "refused".
const char* database_state_name(DatabaseStatus::State s);

/// What the runtime consults: its databases (the user's first) and its compile cache.
struct RuntimeStatus {
  std::vector<DatabaseStatus> databases;
  std::string cache_dir;   // the on-disk compile cache in use; empty when compiling in memory
  std::string cache_note;  // why the disk cache is not used, when it is not
};

struct RuntimeOptions {
  std::string db_path;                 // user database; empty: $KTUNE_DB or the default location
  bool use_shipped_databases = true;   // read-only databases installed with ktune / $KTUNE_DB_PATH
  std::string cache_dir;               // compile cache; empty: default per-user directory
  bool disk_cache = true;
};

/// Element strides of one attention tensor; the head dimension is contiguous.
struct AttentionStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t seq = 0;
};

/// Strides of q, k, v and o: [B,H,S,D] and [B,S,H,D] (and any other strided view) work without
/// copies. Every stride must keep rows 16-byte aligned.
struct AttentionLayout {
  AttentionStrides q, k, v, o;
  /// Contiguous [B, H, S, D] tensors.
  static AttentionLayout bhsd(std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk,
                              std::int64_t d);
  /// Contiguous [B, S, H, D] tensors.
  static AttentionLayout bshd(std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nk,
                              std::int64_t d);
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// The process-wide runtime the C API uses.
  static Runtime& global();

  void add_rmsnorm(const void* x, const void* residual, const void* weight, void* y, void* h,
                   std::int64_t m, std::int64_t n, DType dtype, float eps, Stream stream);
  /// residual and h are both null (plain layernorm) or both set.
  void layernorm(const void* x, const void* residual, const void* weight, const void* bias,
                 void* y, void* h, std::int64_t m, std::int64_t n, DType dtype, float eps,
                 Stream stream);
  void bias_act(const void* x, const void* bias, void* y, std::int64_t m, std::int64_t n,
                Activation act, DType dtype, Stream stream);
  void swiglu(const void* x, void* y, std::int64_t m, std::int64_t n, DType dtype, Stream stream);
  void softmax(const void* x, void* y, std::int64_t m, std::int64_t n, float scale, DType dtype,
               Stream stream);

  /// Flash attention forward: o = softmax(scale * q k^T [causal mask]) v, with q [B, Hq, Nq, D],
  /// k and v [B, Hkv, Nk, D], o like q (strides from `layout`; null: contiguous [B,H,S,D]).
  /// Hq must be a multiple of Hkv. Causal masking is aligned to the bottom right when Nq != Nk.
  /// `lse` (may be null) receives the fp32 row log-sum-exp, [B, Hq, Nq] contiguous.
  /// scale <= 0 means 1/sqrt(D).
  void flash_attention(const void* q, const void* k, const void* v, void* o, float* lse,
                       std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                       std::int64_t nk, std::int64_t d, bool causal, float scale, DType dtype,
                       Stream stream, const AttentionLayout* layout = nullptr);

  /// Generic entry: runs `op` with tensors in the op's declared order and scalars likewise.
  /// The problem is given by its dimension values in declared order.
  void run(std::string_view op, const std::vector<std::int64_t>& problem, DType dtype,
           const std::vector<const void*>& tensors, const std::vector<double>& scalars,
           Stream stream);

  /// What would be dispatched for `op` on `shape` ("m=16384,n=4096"); plans it if needed.
  MatchInfo query(std::string_view op, std::string_view shape, DType dtype);

  /// The databases and compile cache this runtime uses, opening them if no call has yet, with
  /// every row of the databases that lookups skip and why. Needs no GPU (creates no CUDA
  /// context). The same facts are logged once per runtime to stderr when KTUNE_LOG is set.
  RuntimeStatus status();

  /// Drops all plans; databases are reopened on the next call.
  void reset();
  /// Replaces the options and drops all plans.
  void configure(RuntimeOptions options);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ktune
