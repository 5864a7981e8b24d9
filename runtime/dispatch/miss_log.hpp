// The miss log: with KTUNE_MISS_LOG=PATH the runtime appends one line for each problem it plans
// without an exact database entry, so that `ktune sweep --from-misses PATH` can tune an
// application's own shapes. Lines are tab-separated: op, dtype, problem key, device key, how the
// problem matched ("nearest_shape", "other_device", "default").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/core/types.hpp"

namespace ktune {

struct MissEntry {
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::string device_key;
  std::string match;
};

/// The line for `e`, newline included.
std::string miss_line(const MissEntry& e);

/// Appends `line` to `path` in one write (O_APPEND: lines of concurrent processes never
/// interleave), creating the file (0644) when missing. Refuses anything but a regular file
/// without blocking (a FIFO, a device, a directory). nullopt on success, else why not.
std::optional<std::string> append_line(const std::string& path, const std::string& line);

/// Parses a miss log: each line's op, dtype and problem must parse and be valid (the op's own
/// messages); bad lines are skipped with a reason ("line N: why") in `skipped`. Duplicate
/// (op, dtype, problem) entries are kept once, in first-seen order. Throws InvalidArgument when the
/// file cannot be read.
std::vector<MissEntry> read_miss_log(const std::string& path, std::vector<std::string>& skipped);

}  // namespace ktune
