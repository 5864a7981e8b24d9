// The lookup policy: exact (device, op, dtype, problem) -> nearest tuned problem on this device
// -> nearest tuned problem on another device of the same architecture -> built-in default; a
// neighbour counts only within the op's fallback radius, in the same regime, with every exact dim
// equal, and serves only where it beat the default there by kNeighbourMinGain (another device's
// row only when its database holds a trial of this device's default to judge it by).
// Only rows whose template hash matches the compiled-in kernels count (stale rows are skipped),
// and every parameter read from a database is validated against the op's space first.
// Nothing is skipped silently: each database's state, each row a lookup skips and each query
// that fails are recorded with their reasons (status()), and reported once to a sink (the log).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "db/store.hpp"
#include "ktune/ktune.hpp"
#include "templates/op.hpp"

namespace ktune {

struct LookupResult {
  Match kind = Match::default_config;
  Params params;
  std::string tuned_problem;
  std::string tuned_device;
  std::string database;
  double tuned_us = 0.0;
  /// Why the default serves although a neighbour was found, or that a neighbour serves unjudged
  /// (its database holds no trial of the default on its problem); empty otherwise.
  std::string note;
  /// Why the default given cannot run the problem (see MatchInfo::cannot_run); empty otherwise.
  std::string cannot_run;
};

/// What the runtime reports of a lookup of `op` for `problem` (Runtime::query, `ktune best`).
MatchInfo match_info(const Op& op, const Problem& problem, const LookupResult& found);

/// How much faster than the default a neighbour's configuration must have been on its own
/// problem (both timed in its sweep) to serve another problem in the default's place. Where the
/// tuned point beat the default by less, the choice between the two is within what moves from
/// one shape to the next, and the default, written to generalise, is the safer choice: on the
/// H100 a row tuned at nq=nk=16384 (1.05x the default there) served nq=nk=12000 at 0.85x of the
/// default's speed (benchmarks/results/fallback-h100-2026-11-24-short-keys.md).
inline constexpr double kNeighbourMinGain = 1.1;

/// The user's database over the shipped read-only ones, opened read-only for lookups.
/// A database that cannot be used (not a regular file, corrupt, foreign, newer schema) is refused
/// with its reason; a row that cannot be used is skipped alone, with its reason; the rest of its
/// database stays in use. Not thread-safe (the runtime serialises planning).
class TuningDatabases {
 public:
  /// Receives one line for each new fact, once: a database's state when it is opened, a skipped
  /// row, a failed query. Lines name the database and carry no trailing newline.
  using Sink = std::function<void(const std::string& line)>;

  /// `user` may not exist yet (state missing, not an error); `shipped` are looked at after it,
  /// in order.
  TuningDatabases(std::filesystem::path user, std::vector<std::filesystem::path> shipped,
                  Sink sink = {});

  LookupResult find(const Op& op, DType dtype, const Problem& problem, const DeviceInfo& device);

  /// Each database in lookup order, its state, and the rows skipped so far (by lookups, and by
  /// scan() once it has run).
  std::vector<DatabaseStatus> status() const;

  /// Reads every best and device row of the loaded databases once, so that status() lists every
  /// row a lookup would skip before any lookup has run (needs no device). Later calls do nothing.
  void scan();

  /// The fingerprint of a device recorded in these databases whose name or key is
  /// `name_or_key` (user's database first; in each, a key match before a name match; then a
  /// name that differs in case or surrounding blanks only), for
  /// answering for a GPU that is not here (`ktune best --device NAME`); nullopt when none is.
  std::optional<DeviceInfo> find_device(const std::string& name_or_key) const;
  /// The names of the devices the databases record, each once, in the order they are read.
  std::vector<std::string> device_names() const;

  /// At most this many skipped rows are kept per database; the others are only counted.
  static constexpr std::size_t kMaxListedRows = 100;

 private:
  struct Entry {
    std::filesystem::path path;
    std::unique_ptr<Store> store;  // null unless loaded
    DatabaseStatus status;         // skipped_rows, skipped_count and errors grow as lookups go
    std::unordered_set<std::string> seen;  // rows and errors already recorded
  };

  void skip_row(Entry& e, const std::string& id, const std::string& text) const;
  void skip_rows(Entry& e, const std::vector<RowIssue>& issues) const;
  void skip_best(Entry& e, const BestRecord& row, const std::string& why) const;
  void query_failed(Entry& e, const std::string& what, const std::exception& err) const;
  /// How many times faster than the op's default configuration the row's configuration ran on
  /// the row's own problem, from the trials of the row's database (the newest ok one of each;
  /// the row's median when its configuration has none), or nullopt when it holds no trial of
  /// the default (`*missing` then true) or the default is the row's configuration.
  std::optional<double> neighbour_gain(Entry& e, const Op& op, DType dtype, const BestRecord& row,
                                       const DeviceInfo& device, bool* missing) const;

  // Mutable: a const query (find_device) still records the rows it skips.
  mutable std::vector<Entry> dbs_;
  Sink sink_;
  bool scanned_ = false;
};

/// "database PATH: loaded", "database PATH: missing (why)" or "database PATH: refused: why".
std::string database_line(const DatabaseStatus& status);

/// Why a best row can be used by no lookup (an unknown op, a dtype the op does not take, a
/// problem or params key that does not parse, parameters outside the op's space, a timing that
/// is not finite and >= 0), or nullopt. Validity on a particular device is checked at lookup
/// time. Meaningful for rows of the op's current template hash (a stale row was tuned for another
/// space). Shared by the lookup and `ktune db check`. One line, values quoted and truncated.
std::optional<std::string> best_row_reason(const BestRecord& row);

/// The device-independent part of best_row_reason, for any row naming a configuration (best and
/// trial rows): the op is known and takes `dtype`, and both keys parse in its space.
std::optional<std::string> keys_reason(const std::string& op, DType dtype,
                                       const std::string& problem_key,
                                       const std::string& params_key);

/// Distance between two problems of one op: Euclidean in log space over the dims matched by
/// distance; infinity when a dim matched exactly (DimSpec::matched_exactly) differs or a dim's
/// values lie in different regimes (DimSpec::regimes). The lookup serves a neighbour only within
/// Op::fallback_radius().
double problem_distance(const Op& op, const Problem& a, const Problem& b);

/// The problem_distance at which a configuration tuned on `tuned` may serve `wanted` on `device`
/// as a neighbour: within Op::fallback_radius() and Op::fallback_compatible(); nullopt when it
/// may not. The lookup's rule, shared with the tuner's warm start (tuner/warm_start.hpp).
std::optional<double> fallback_distance(const Op& op, const Problem& wanted, const Problem& tuned,
                                        const DeviceInfo& device);

}  // namespace ktune
