// ktune sweep --plan: the CLI side of tuning plans (tuner/plan.hpp parses, slices and decides
// what to resume): the device whose rows count, progress over the whole plan, the summary.
#pragma once

#include <string>
#include <vector>

#include "tuner/devices.hpp"
#include "tuner/sweep.hpp"

namespace ktune::cli {

struct PlanRun {
  std::string path;              // --plan
  std::string shard;             // --shard (empty: the whole plan)
  bool dry_run = false;          // list what would be swept; no GPU, nothing written
  bool json = false;
  bool tty = false;              // stderr is a terminal (progress lines redraw)
  std::vector<SweepDevice> devices;  // --devices; empty: the base options' device alone
};

/// Sweeps the plan's problems (this shard's, less those the database holds) in order, with
/// `base`'s options (its op, dtype, shape and buckets are replaced line by line); the time limit
/// covers the whole plan. With `devices`, each kind of GPU (fingerprint key) gets every problem
/// its rows lack, spread over the GPUs of that kind: a line at a time where the kind has one GPU,
/// a problem (bucket) at a time where it has several. A problem that fails is reported and the
/// plan goes on. 0 when every problem swept has a best, else 1.
int sweep_plan(const PlanRun& run, SweepOptions base);

}  // namespace ktune::cli
