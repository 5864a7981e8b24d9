// The lookup policy: exact (device, op, dtype, problem) -> nearest tuned problem on this device
// -> nearest tuned problem on another device of the same architecture -> built-in default.
// Only rows whose template hash matches the compiled-in kernels count (stale rows are skipped),
// and every parameter read from a database is validated against the op's space first.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
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
};

/// The user's database over the shipped read-only ones, opened read-only for lookups.
/// A database that cannot be opened (missing, corrupt, foreign) is skipped with a note.
class TuningDatabases {
 public:
  /// `user` may not exist yet; `shipped` are looked at after it, in order.
  TuningDatabases(std::filesystem::path user, std::vector<std::filesystem::path> shipped);

  LookupResult find(const Op& op, DType dtype, const Problem& problem, const DeviceInfo& device);

  /// Why databases were skipped (for logs).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Entry {
    std::filesystem::path path;
    std::unique_ptr<Store> store;  // null when it could not be opened
  };
  std::vector<Entry> dbs_;
  std::vector<std::string> notes_;
};

/// Distance between two problems of one op: Euclidean in log space over the integer dims;
/// infinity when an enumerated dim differs.
double problem_distance(const Op& op, const Problem& a, const Problem& b);

}  // namespace ktune
