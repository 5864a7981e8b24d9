// A tuning plan: the problems of a model (or any list) to sweep in order, one line per op, dtype
// and problem. Parsing refuses a bad line before anything is swept; shards slice a plan for batch
// schedulers; the resume decision says which problems a database already holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "runtime/core/types.hpp"

namespace ktune {

/// One line of a plan: `OP DTYPE SHAPE [tokens=LIST]`.
struct PlanLine {
  std::size_t line = 0;                   // 1-based line number in the file
  std::string text;                       // the line as written, without comment and edges
  std::string op;
  DType dtype = DType::bf16;
  std::string shape;                      // as written (causal=yes etc. inside)
  std::vector<std::int64_t> buckets;      // op.bucket_dim() values, one problem each; empty: one
  std::vector<std::string> problem_keys;  // Op::problem_key of each problem, in sweep order
};

struct Plan {
  std::string name;                       // the file, for messages
  std::vector<PlanLine> lines;
  std::size_t problems() const;           // over every line (a bucket is a problem)
};

/// Parses a plan. Blank lines and `#` comments (whole lines or trailing) are skipped. A line is
/// `OP DTYPE SHAPE`, with `tokens=1,16,128` after the shape for ops with token buckets (moe; a
/// moe shape that sets neither t nor tokens stands for the op's default buckets). Every problem
/// is checked as `ktune sweep` checks it. Throws InvalidArgument naming the plan, the line
/// number, the line's text, what is wrong and what is allowed; an empty plan is refused too.
Plan parse_plan(std::istream& in, const std::string& name);
/// parse_plan of a file; InvalidArgument when it cannot be read.
Plan load_plan(const std::filesystem::path& path);

/// Which of `count` disjoint slices of a plan to run (0-based `index`).
struct Shard {
  std::size_t index = 0;
  std::size_t count = 1;
};

/// Where --shard auto looks: getenv in production, a table in tests.
using EnvLookup = std::function<const char*(const char*)>;

/// `I/N` (0 <= I < N <= 100000) or `auto`: the Slurm array variables (SLURM_ARRAY_TASK_ID with
/// SLURM_ARRAY_TASK_MIN/MAX, else with SLURM_ARRAY_TASK_COUNT), else OMPI_COMM_WORLD_RANK/SIZE,
/// else PMI_RANK/PMI_SIZE. Throws InvalidArgument naming the text or the variables and values.
Shard parse_shard(const std::string& text, const EnvLookup& env);

/// The shard's lines: line k (0-based among the plan's non-comment lines) belongs to shard
/// k % count. Round robin by line keeps a moe line's buckets together (one worker start) and
/// spreads each model's op families over the shards; every line is in exactly one shard, and a
/// line's shard depends only on its position.
Plan shard_plan(const Plan& plan, Shard shard);

/// What a database already holds of a plan's line, for one device.
struct PlanLineState {
  PlanLine todo;                          // the line with only the problems left to sweep
  std::vector<std::string> done;          // problem keys skipped (complete in the database)
};

/// For each line, the problems left and those done for `device_key`. A problem is done when its
/// best row exists for this device, op, dtype, problem and the op's current template hash and
/// was written by a finished sweep: every ok trial also raises the best row as it is measured,
/// so a row that still points at a trial (trial_id != 0) can be the leftover of a sweep killed
/// half way, which must run again (its measured trials resume from the database). With `force`
/// nothing is done.
std::vector<PlanLineState> plan_resume(const Plan& plan, const Store& store,
                                       const std::string& device_key, bool force);

}  // namespace ktune
