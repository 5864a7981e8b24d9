#include "tuner/compile_pool.hpp"

#include <algorithm>

#include "ktune/error.hpp"

namespace ktune {

CompilePool::CompilePool(const Compiler& compiler, int threads)
    : compiler_(compiler),
      max_threads_(threads > 0 ? static_cast<std::size_t>(threads)
                               : std::max(1u, std::thread::hardware_concurrency())) {}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  queued_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::size_t CompilePool::submit(std::vector<CompileJob> jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t first = slots_.size();
  for (CompileJob& j : jobs) slots_.push_back(Slot{std::move(j), {}, nullptr, false});
  // Threads start as work arrives, never more than jobs waiting.
  while (threads_.size() < max_threads_ && threads_.size() < slots_.size() - next_)
    threads_.emplace_back([this] { work(); });
  queued_.notify_all();
  return first;
}

const CompileOutcome& CompilePool::wait(std::size_t i) {
  std::unique_lock<std::mutex> lock(mu_);
  finished_.wait(lock, [&] { return slots_.at(i).done; });
  if (slots_[i].failure) std::rethrow_exception(slots_[i].failure);
  return slots_[i].outcome;
}

void CompilePool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    queued_.wait(lock, [&] { return stop_ || next_ < slots_.size(); });
    if (stop_) return;
    Slot& slot = slots_[next_++];
    lock.unlock();
    CompileOutcome out;
    std::exception_ptr failure;
    try {
      out.kernel = compiler_.compile(slot.job);
    } catch (const CompileTimeout& e) {
      out.error = e.what();
      out.timed_out = true;
    } catch (const CompileError& e) {
      out.error = std::string(e.what()) + "\n" + e.log();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    slot.outcome = std::move(out);
    slot.failure = failure;
    slot.done = true;
    finished_.notify_all();
  }
}

}  // namespace ktune
