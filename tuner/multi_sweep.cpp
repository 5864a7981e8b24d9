#include "tuner/multi_sweep.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ktune/error.hpp"
#include "runtime/core/types.hpp"

namespace ktune {
namespace {

/// The shared state of one run; every member below `mu` is guarded by it.
class Runner {
 public:
  Runner(const std::vector<DeviceJob>& jobs, const std::vector<SweepDevice>& devices,
         const SweepOnDevice& sweep, const DeviceEvents& events, const DeviceRunOptions& options)
      : jobs_(jobs),
        devices_(devices),
        sweep_(sweep),
        events_(events),
        options_(options),
        failed_on_(jobs.size()),
        live_(devices.size(), true),
        out_(jobs.size()) {
    for (std::size_t j = 0; j < jobs.size(); ++j) queues_[jobs[j].device_key].push_back(j);
  }

  std::vector<DeviceJobOutcome> run() {
    std::vector<std::thread> threads;
    for (std::size_t slot = 0; slot < devices_.size(); ++slot)
      threads.emplace_back([this, slot] { serve(slot); });
    for (std::thread& t : threads) t.join();
    return std::move(out_);
  }

 private:
  bool can_take(std::size_t job, std::size_t slot) const {
    return live_[slot] && devices_[slot].key == jobs_[job].device_key &&
           failed_on_[job].count(slot) == 0;
  }

  bool anyone_can_take(std::size_t job) const {
    for (std::size_t slot = 0; slot < devices_.size(); ++slot)
      if (can_take(job, slot)) return true;
    return false;
  }

  bool another_of_kind(std::size_t slot) const {
    for (std::size_t other = 0; other < devices_.size(); ++other)
      if (other != slot && live_[other] && devices_[other].key == devices_[slot].key) return true;
    return false;
  }

  // Reports the waiting jobs of `key` that no GPU left may take.
  void give_up(const std::string& key) {
    std::deque<std::size_t>& q = queues_[key];
    for (auto it = q.begin(); it != q.end();) {
      if (anyone_can_take(*it)) {
        ++it;
        continue;
      }
      if (out_[*it].errors.empty())
        out_[*it].errors.push_back("not swept: no GPU of its kind was left to try it");
      it = q.erase(it);
    }
  }

  // One GPU's thread: takes jobs of its key until none is left that it may take and none of
  // its key is running elsewhere (a job failing there could come back for it).
  void serve(std::size_t slot) {
    const SweepDevice& d = devices_[slot];
    std::unique_lock<std::mutex> lock(mu_);
    std::deque<std::size_t>& queue = queues_[d.key];  // map nodes stay where they are
    int failures = 0;
    for (;;) {
      if (!stopped_ && options_.stop && options_.stop()) stopped_ = true;
      if (stopped_) break;
      const auto next = std::find_if(queue.begin(), queue.end(),
                                     [&](std::size_t j) { return can_take(j, slot); });
      if (next == queue.end()) {
        if (in_flight_[d.key] == 0) break;
        changed_.wait(lock);
        continue;
      }
      const std::size_t job = *next;
      queue.erase(next);
      ++in_flight_[d.key];
      if (events_.started) events_.started(job, d);
      lock.unlock();
      std::vector<SweepResult> results;
      std::string error;
      try {
        results = sweep_(job, d);
      } catch (const std::exception& e) {
        error = *e.what() != '\0' ? e.what() : "failed without a message";
      } catch (...) {
        error = "failed with an exception that is not a std::exception";
      }
      lock.lock();
      --in_flight_[d.key];
      if (error.empty()) {
        failures = 0;
        out_[job].results = std::move(results);
        out_[job].device = d.ordinal;
        if (events_.finished) events_.finished(job, d);
      } else {
        failed_on_[job].insert(slot);
        out_[job].errors.push_back("GPU " + std::to_string(d.ordinal) + " (" + d.name + "): " +
                                   error);
        // A GPU that keeps failing is dropped while another of its kind is there to take its
        // problems; the last of its kind goes on, each failure reported with its problem.
        if (++failures >= std::max(1, options_.failures_to_drop) && another_of_kind(slot))
          live_[slot] = false;
        // Retried soon, by the first GPU of its kind that has not failed it.
        const bool again = anyone_can_take(job);
        if (again) queue.push_front(job);
        if (events_.failed) events_.failed(job, d, error, again);
        if (!live_[slot] && events_.dropped)
          events_.dropped(d, "failed " + std::to_string(failures) + " jobs in a row, the last with: " +
                                 error);
      }
      changed_.notify_all();
      if (!live_[slot]) break;
    }
    live_[slot] = false;
    if (!stopped_) give_up(d.key);
    changed_.notify_all();
  }

  const std::vector<DeviceJob>& jobs_;
  const std::vector<SweepDevice>& devices_;
  const SweepOnDevice& sweep_;
  const DeviceEvents& events_;
  const DeviceRunOptions& options_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::deque<std::size_t>> queues_;  // per key: jobs waiting, in order
  std::map<std::string, int> in_flight_;                   // per key: jobs running
  std::vector<std::set<std::size_t>> failed_on_;           // per job: slots that failed it
  std::vector<bool> live_;                                 // per slot: still taking jobs
  std::vector<DeviceJobOutcome> out_;
  bool stopped_ = false;
};

}  // namespace

std::vector<DeviceJobOutcome> sweep_on_devices(const std::vector<DeviceJob>& jobs,
                                               const std::vector<SweepDevice>& devices,
                                               const SweepOnDevice& sweep,
                                               const DeviceEvents& events,
                                               const DeviceRunOptions& options) {
  std::set<int> ordinals;
  std::set<std::string> keys;
  for (const SweepDevice& d : devices) {
    if (!ordinals.insert(d.ordinal).second)
      throw InvalidArgument("GPU " + std::to_string(d.ordinal) + " is listed twice");
    keys.insert(d.key);
  }
  for (const DeviceJob& j : jobs)
    if (keys.count(j.device_key) == 0)
      throw InvalidArgument("no GPU of the kind " + quoted(j.device_key, 200) + " for " +
                            quoted(j.label, 200));
  if (jobs.empty()) return {};
  return Runner(jobs, devices, sweep, events, options).run();
}

}  // namespace ktune
