#include "runtime/dispatch/lookup.hpp"

#include <cmath>
#include <limits>
#include <optional>

#include "ktune/error.hpp"

namespace ktune {

double problem_distance(const Op& op, const Problem& a, const Problem& b) {
  const std::vector<DimSpec>& dims = op.dims();
  double sum = 0.0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].enumerated()) {
      if (a.values[i] != b.values[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    double d = std::log(static_cast<double>(a.values[i])) - std::log(static_cast<double>(b.values[i]));
    sum += d * d;
  }
  return std::sqrt(sum);
}

TuningDatabases::TuningDatabases(std::filesystem::path user,
                                 std::vector<std::filesystem::path> shipped) {
  std::vector<std::filesystem::path> paths;
  if (!user.empty()) paths.push_back(std::move(user));
  for (auto& p : shipped) paths.push_back(std::move(p));
  for (auto& p : paths) {
    Entry e;
    e.path = p;
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) {
      try {
        e.store = std::make_unique<Store>(Store::open(p, Store::Mode::read_only));
      } catch (const std::exception& err) {
        notes_.push_back("skipping database " + p.string() + ": " + err.what());
      }
    }
    dbs_.push_back(std::move(e));
  }
}

namespace {

// The parameters of a database row, if they are a valid point for this problem and device.
std::optional<Params> usable(const Op& op, const std::string& params_key, DType dtype,
                             const Problem& problem, const DeviceInfo& device) {
  Params p;
  try {
    p = op.parse_params(params_key);
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
  if (op.check_params(p) || op.invalid_reason(p, problem, dtype, device)) return std::nullopt;
  return p;
}

}  // namespace

LookupResult TuningDatabases::find(const Op& op, DType dtype, const Problem& problem,
                                   const DeviceInfo& device) {
  const std::string hash = op.template_hash();
  const std::string key = op.problem_key(problem);
  const std::string device_key = device.key();
  const std::string arch = device.arch();
  const std::string op_name(op.name());

  // 1. Exact: the user's database first, then the shipped ones.
  for (const Entry& e : dbs_) {
    if (!e.store) continue;
    std::optional<BestRecord> b;
    try {
      b = e.store->best(device_key, op_name, dtype, key, hash);
    } catch (const std::exception&) {
      continue;  // a database that fails mid-read is skipped like a missing one
    }
    if (!b) continue;
    if (std::optional<Params> p = usable(op, b->params_key, dtype, problem, device)) {
      return {Match::exact, *p, b->problem_key, b->device_key, e.path.string(), b->median_us};
    }
  }

  // 2./3. Nearest problem on this device, then on another device of the same architecture.
  struct Candidate {
    double distance;
    std::size_t db;
    BestRecord row;
  };
  std::optional<Candidate> same, other;
  for (std::size_t i = 0; i < dbs_.size(); ++i) {
    if (!dbs_[i].store) continue;
    std::vector<BestRecord> rows;
    try {
      rows = dbs_[i].store->bests(op_name, dtype);
    } catch (const std::exception&) {
      continue;
    }
    for (BestRecord& r : rows) {
      if (r.template_hash != hash) continue;  // stale: tuned for other kernel code
      bool this_device = r.device_key == device_key;
      if (!this_device && r.arch != arch) continue;
      Problem tuned;
      try {
        tuned = op.parse_problem(r.problem_key);
      } catch (const InvalidArgument&) {
        continue;
      }
      double d = problem_distance(op, problem, tuned);
      if (!std::isfinite(d)) continue;
      if (!usable(op, r.params_key, dtype, problem, device)) continue;
      std::optional<Candidate>& slot = this_device ? same : other;
      // Strictly nearer wins; on a tie the earlier database (the user's) keeps its place.
      if (!slot || d < slot->distance) slot = Candidate{d, i, std::move(r)};
    }
  }
  for (auto* c : {&same, &other}) {
    if (!*c) continue;
    const Candidate& x = **c;
    return {c == &same ? Match::nearest_shape : Match::other_device,
            op.parse_params(x.row.params_key), x.row.problem_key, x.row.device_key,
            dbs_[x.db].path.string(), x.row.median_us};
  }

  // 4. The built-in default.
  LookupResult r;
  r.kind = Match::default_config;
  r.params = op.default_params(problem, dtype, device);
  return r;
}

}  // namespace ktune
