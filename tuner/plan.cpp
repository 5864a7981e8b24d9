#include "tuner/plan.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "db/file.hpp"
#include "ktune/error.hpp"
#include "templates/op.hpp"
#include "tuner/sweep.hpp"

namespace ktune {
namespace {

constexpr const char* kLineForm =
    "expected OP DTYPE SHAPE, and tokens=LIST after the shape for ops with token buckets (moe), "
    "fields separated by spaces, # for comments";

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r") + 1 - a);
}

std::vector<std::string> fields(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

/// "1,16,128" as integers from 1 to 2^31 (the sweep command's --tokens range).
std::vector<std::int64_t> token_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item =
        text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::int64_t v = 0;
    const char* end = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(item.data(), end, v);
    if (item.empty() || ec != std::errc() || ptr != end || v < 1 || v > (1LL << 31))
      throw InvalidArgument("tokens " + ktune::quoted(text) + ": " + ktune::quoted(item) +
                            " is not an integer from 1 to 2147483648 (a comma-separated list)");
    out.push_back(v);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

/// One non-blank line, checked as `ktune sweep --op --dtype --shape [--tokens]` checks it.
PlanLine parse_line(const std::string& text) {
  const std::vector<std::string> f = fields(text);
  if (f.size() < 3 || f.size() > 4) throw InvalidArgument(kLineForm);
  PlanLine l;
  l.text = text;
  const Op& op = get_op(f[0]);  // names the known ops
  l.op = std::string(op.name());
  const std::optional<DType> t = parse_dtype(f[1]);
  if (!t)
    throw InvalidArgument("unsupported dtype " + ktune::quoted(f[1]) +
                          " (allowed: bf16, fp16, e4m3)");
  l.dtype = *t;
  const std::vector<DType> allowed = op.dtypes();
  if (std::find(allowed.begin(), allowed.end(), l.dtype) == allowed.end()) {
    std::string list;
    for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
    throw InvalidArgument("dtype " + std::string(dtype_name(l.dtype)) + " is not supported by " +
                          l.op + " (allowed: " + list + ")");
  }
  l.shape = f[2];
  const std::string_view dim = op.bucket_dim();
  if (f.size() == 4) {
    if (f[3].rfind("tokens=", 0) != 0) throw InvalidArgument(kLineForm);
    if (dim.empty())
      throw InvalidArgument("tokens= applies to ops with token buckets (moe); " + l.op +
                            " takes one problem");
    l.buckets = token_list(f[3].substr(7));
  } else if (!dim.empty() && !shape_names_dim(l.shape, dim)) {
    l.buckets = op.default_buckets();
  }
  SweepOptions o;
  o.op = l.op;
  o.dtype = l.dtype;
  o.shape = l.shape;
  o.buckets = l.buckets;
  // The sweep's own expansion and checks (range of every dim, bucket given twice); duplicates
  // collapse there, so the buckets are re-read from the problems.
  const std::vector<Problem> problems = sweep_problems(op, o);
  if (!l.buckets.empty()) {
    l.buckets.clear();
    for (const Problem& p : problems) l.buckets.push_back(op.dim(p, dim));
  }
  for (const Problem& p : problems) l.problem_keys.push_back(op.problem_key(p));
  return l;
}

}  // namespace

std::size_t Plan::problems() const {
  std::size_t n = 0;
  for (const PlanLine& l : lines) n += l.problem_keys.size();
  return n;
}

Plan parse_plan(std::istream& in, const std::string& name) {
  Plan plan;
  plan.name = name;
  std::string raw;
  for (std::size_t number = 1; std::getline(in, raw); ++number) {
    const std::string text = trim(raw.substr(0, raw.find('#')));
    if (text.empty()) continue;
    try {
      PlanLine l = parse_line(text);
      l.line = number;
      plan.lines.push_back(std::move(l));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("plan " + ktune::quoted(name, 200) + " line " + std::to_string(number) + " " +
                            ktune::quoted(text, 200) + ": " + e.what());
    }
  }
  if (in.bad()) throw InvalidArgument("plan " + ktune::quoted(name, 200) + " could not be read");
  if (plan.lines.empty())
    throw InvalidArgument("plan " + ktune::quoted(name, 200) + " lists no problem (" + kLineForm + ")");
  return plan;
}

Plan load_plan(const std::filesystem::path& path) {
  if (std::optional<std::string> why = db::text_input_problem(path, "the plan"))
    throw InvalidArgument(*why);
  std::ifstream in(path);
  if (!in)
    throw InvalidArgument("cannot open the plan " + ktune::quoted(path.string(), 200) + ": " +
                          std::strerror(errno));
  return parse_plan(in, path.string());
}

namespace {

constexpr std::size_t kMaxShards = 100000;

/// A variable's value as an integer from `min` to `max`, or an error naming it and its value.
std::size_t env_integer(const EnvLookup& env, const char* name, long long min, long long max) {
  const char* v = env(name);
  const std::string text = v ? v : "";
  long long n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || n < min || n > max)
    throw InvalidArgument("--shard auto: " + std::string(name) + "=" + ktune::quoted(text) +
                          " is not an integer from " + std::to_string(min) + " to " +
                          std::to_string(max));
  return static_cast<std::size_t>(n);
}

bool has(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v && *v;
}

Shard check_shard(Shard s, const std::string& from) {
  if (s.count < 1 || s.count > kMaxShards || s.index >= s.count)
    throw InvalidArgument("--shard: " + from + " gives shard " + std::to_string(s.index) + " of " +
                          std::to_string(s.count) + " (allowed: I/N with 0 <= I < N <= " +
                          std::to_string(kMaxShards) + ")");
  return s;
}

Shard auto_shard(const EnvLookup& env) {
  const long long big = 1LL << 31;
  if (has(env, "SLURM_ARRAY_TASK_ID")) {
    const std::size_t id = env_integer(env, "SLURM_ARRAY_TASK_ID", 0, big);
    // MIN/MAX first: an array 1-4 has ids 1..4 and a count of 4.
    if (has(env, "SLURM_ARRAY_TASK_MIN") && has(env, "SLURM_ARRAY_TASK_MAX")) {
      const std::size_t lo = env_integer(env, "SLURM_ARRAY_TASK_MIN", 0, big);
      const std::size_t hi = env_integer(env, "SLURM_ARRAY_TASK_MAX", 0, big);
      if (hi < lo || id < lo || id > hi)
        throw InvalidArgument("--shard auto: SLURM_ARRAY_TASK_ID=" + std::to_string(id) +
                              " is not within SLURM_ARRAY_TASK_MIN=" + std::to_string(lo) +
                              " .. SLURM_ARRAY_TASK_MAX=" + std::to_string(hi));
      const std::size_t n = hi - lo + 1;
      if (has(env, "SLURM_ARRAY_TASK_COUNT") &&
          env_integer(env, "SLURM_ARRAY_TASK_COUNT", 1, big) != n)
        throw InvalidArgument("--shard auto: SLURM_ARRAY_TASK_COUNT disagrees with "
                              "SLURM_ARRAY_TASK_MIN..MAX (a stepped or sparse array such as "
                              "0-7:2 or 1,5,9): use --array=0-N-1, or --shard I/N");
      return check_shard({id - lo, n}, "SLURM_ARRAY_TASK_ID/MIN/MAX");
    }
    if (has(env, "SLURM_ARRAY_TASK_COUNT"))
      return check_shard({id, env_integer(env, "SLURM_ARRAY_TASK_COUNT", 1, big)},
                         "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
    throw InvalidArgument("--shard auto: SLURM_ARRAY_TASK_ID is set but neither "
                          "SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX is");
  }
  const char* families[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                               {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& f : families) {
    if (!has(env, f[0]) && !has(env, f[1])) continue;
    if (!has(env, f[0]) || !has(env, f[1]))
      throw InvalidArgument("--shard auto: " + std::string(has(env, f[0]) ? f[0] : f[1]) +
                            " is set but " + (has(env, f[0]) ? f[1] : f[0]) + " is not");
    return check_shard({env_integer(env, f[0], 0, big), env_integer(env, f[1], 1, big)},
                       std::string(f[0]) + "/" + f[1]);
  }
  throw InvalidArgument("--shard auto: none of SLURM_ARRAY_TASK_ID (with SLURM_ARRAY_TASK_COUNT "
                        "or _MIN/_MAX), OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE is set; "
                        "run under sbatch --array, mpirun or srun, or give --shard I/N");
}

}  // namespace

Shard parse_shard(const std::string& text, const EnvLookup& env) {
  if (text == "auto") return auto_shard(env);
  const std::size_t slash = text.find('/');
  const auto number = [&](std::size_t from, std::size_t to, std::size_t& out) {
    const auto [ptr, ec] = std::from_chars(text.data() + from, text.data() + to, out);
    return to > from && ec == std::errc() && ptr == text.data() + to;
  };
  Shard s;
  if (slash == std::string::npos || !number(0, slash, s.index) ||
      !number(slash + 1, text.size(), s.count) || s.count < 1 || s.count > kMaxShards ||
      s.index >= s.count)
    throw InvalidArgument("--shard " + ktune::quoted(text) + " is not allowed: expected I/N with 0 <= I "
                          "< N <= " + std::to_string(kMaxShards) + " (e.g. 0/4), or auto");
  return s;
}

Plan shard_plan(const Plan& plan, Shard shard) {
  Plan out;
  out.name = plan.name;
  for (std::size_t k = 0; k < plan.lines.size(); ++k)
    if (k % shard.count == shard.index) out.lines.push_back(plan.lines[k]);
  return out;
}

std::vector<PlanLineState> plan_resume(const Plan& plan, const Store& store,
                                       const std::string& device_key, bool force) {
  std::vector<PlanLineState> out;
  for (const PlanLine& l : plan.lines) {
    const Op& op = get_op(l.op);
    const std::string hash = op.template_hash();
    PlanLineState s;
    s.todo = l;
    s.todo.buckets.clear();
    s.todo.problem_keys.clear();
    for (std::size_t i = 0; i < l.problem_keys.size(); ++i) {
      const std::string& key = l.problem_keys[i];
      bool done = false;
      if (!force) {
        const std::optional<BestRecord> b = store.best(device_key, l.op, l.dtype, key, hash);
        done = b && b->trial_id == 0;
      }
      if (done) {
        s.done.push_back(key);
        continue;
      }
      s.todo.problem_keys.push_back(key);
      if (!l.buckets.empty()) s.todo.buckets.push_back(l.buckets[i]);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ktune
