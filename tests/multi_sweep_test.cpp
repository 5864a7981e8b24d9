// Sweeps over several GPUs without a GPU: the --devices list and its messages, the compile
// threads' split, the scheduler (tuner/multi_sweep.hpp) driven by fake "sweep this job on GPU d"
// functions, and the compile cache shared by two compilers at once. Also the leaders'
// re-timing order and the median of its rounds (tuner/measure.hpp).
#include "tuner/multi_sweep.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "ktune/error.hpp"
#include "tuner/measure.hpp"
#include "runtime/core/compiler.hpp"
#include "tuner/devices.hpp"

namespace fs = std::filesystem;
using namespace ktune;

namespace {

// ---- the list of GPUs ----

template <class E>
std::string message_of(const std::string& text, int count) {
  try {
    parse_device_list(text, count);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(another exception) ") + e.what();
  }
  return "(no error)";
}

TEST(DeviceList, AllAndListsInTheOrderGiven) {
  EXPECT_EQ(parse_device_list("all", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_device_list("1,0", 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(parse_device_list(" 0 , 2 ", 3), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_device_list("0", 1), (std::vector<int>{0}));
}

TEST(DeviceList, EachBadListHasOneMessageNamingItAndWhatIsAllowed) {
  struct Case {
    std::string text;
    int count;
    bool no_device;  // NoDevice (the GPU is not there), else InvalidArgument (the text is wrong)
    std::string message;
  };
  const std::string allowed = "expected all, or GPU ordinals from 0 to 1023 separated by commas";
  const Case cases[] = {
      {"", 2, false, "--devices \"\" is not allowed: " + allowed},
      {"  ", 2, false, "--devices \"  \" is not allowed: " + allowed},
      {"0,0", 2, false, "--devices \"0,0\": GPU 0 is listed twice (expected each ordinal once)"},
      {"1, 1", 4, false, "GPU 1 is listed twice"},
      {"0,x", 2, false, "--devices \"0,x\": \"x\" is not a GPU ordinal (" + allowed},
      {"-1", 2, false, "\"-1\" is not a GPU ordinal"},
      {"1024", 2, false, "\"1024\" is not a GPU ordinal"},
      {"ALL", 2, false, "\"ALL\" is not a GPU ordinal"},
      {"0,,1", 2, false, "--devices \"0,,1\": an empty item between commas (" + allowed},
      {"0,", 2, false, "an empty item between commas"},
      // The text is checked before the machine: a duplicate is a duplicate without a GPU too.
      {"0,0", 0, false, "GPU 0 is listed twice"},
      {"3", 1, true,
       "--devices \"3\": there is no GPU 3: this machine has 1 (valid ordinals are 0 to 0; all "
       "names each of them)"},
      {"0,1", 1, true, "there is no GPU 1: this machine has 1"},
      {"all", 0, true, "--devices all: the CUDA driver reports no GPU"},
      {"0", 0, true, "--devices \"0\": the CUDA driver reports no GPU"},
  };
  for (const Case& c : cases) {
    const std::string m = c.no_device ? message_of<NoDevice>(c.text, c.count)
                                      : message_of<InvalidArgument>(c.text, c.count);
    EXPECT_NE(m.find(c.message), std::string::npos)
        << "--devices '" << c.text << "' on " << c.count << " GPUs: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(DeviceList, CompileThreadsAreSplitBetweenGpus) {
  EXPECT_EQ(compile_threads_per_device(16, 2), 8);
  EXPECT_EQ(compile_threads_per_device(17, 2), 8);
  EXPECT_EQ(compile_threads_per_device(3, 4), 1);  // at least one each
  EXPECT_EQ(compile_threads_per_device(0, 1), 0);  // one GPU: as --jobs says (0: every core)
  EXPECT_EQ(compile_threads_per_device(5, 1), 5);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(compile_threads_per_device(0, 2), std::max(1, cores / 2));
}

// ---- the scheduler, with fake sweeps ----

std::vector<SweepDevice> gpus(std::vector<int> ordinals, const std::string& key = "H200") {
  std::vector<SweepDevice> out;
  for (int o : ordinals) out.push_back({o, key, "GPU-" + std::to_string(o)});
  return out;
}

std::vector<DeviceJob> jobs_for(const std::string& key, int n) {
  std::vector<DeviceJob> out;
  for (int i = 0; i < n; ++i) out.push_back({key, "problem " + std::to_string(i)});
  return out;
}

// One fake result naming the job and the GPU that swept it.
std::vector<SweepResult> fake_result(std::size_t job, const SweepDevice& d) {
  SweepResult r;
  r.op = "fake";
  r.problem_key = "p" + std::to_string(job);
  r.device.name = d.name;
  return {r};
}

// Calls into the runner's events are made under its lock; these counters only check them.
struct Recorder {
  std::mutex mu;
  std::vector<std::pair<std::size_t, int>> started, finished;  // (job, ordinal)
  std::vector<std::tuple<std::size_t, int, bool>> failed;      // (job, ordinal, again)
  std::vector<int> dropped;

  DeviceEvents events() {
    DeviceEvents e;
    e.started = [this](std::size_t j, const SweepDevice& d) {
      std::lock_guard<std::mutex> l(mu);
      started.emplace_back(j, d.ordinal);
    };
    e.finished = [this](std::size_t j, const SweepDevice& d) {
      std::lock_guard<std::mutex> l(mu);
      finished.emplace_back(j, d.ordinal);
    };
    e.failed = [this](std::size_t j, const SweepDevice& d, const std::string&, bool again) {
      std::lock_guard<std::mutex> l(mu);
      failed.emplace_back(j, d.ordinal, again);
    };
    e.dropped = [this](const SweepDevice& d, const std::string&) {
      std::lock_guard<std::mutex> l(mu);
      dropped.push_back(d.ordinal);
    };
    return e;
  }
};

TEST(MultiSweep, EveryJobOnceInJobOrderAndSpreadOverTheGpus) {
  const std::vector<DeviceJob> jobs = jobs_for("H200", 12);
  // Each job waits (up to 10 s) until both GPUs have started one, so each gets work whatever
  // the scheduling of the threads.
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> seen;
  std::atomic<int> calls{0};
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    ++calls;
    std::unique_lock<std::mutex> lock(mu);
    seen.insert(d.ordinal);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() == 2; });
    return fake_result(job, d);
  };
  Recorder rec;
  const std::vector<DeviceJobOutcome> out = sweep_on_devices(jobs, gpus({0, 1}), sweep, rec.events());
  ASSERT_EQ(out.size(), jobs.size());
  EXPECT_EQ(calls.load(), 12);
  std::map<int, int> per_gpu;
  for (std::size_t j = 0; j < out.size(); ++j) {
    ASSERT_TRUE(out[j].swept()) << j;
    EXPECT_TRUE(out[j].errors.empty());
    ASSERT_EQ(out[j].results.size(), 1u);
    EXPECT_EQ(out[j].results[0].problem_key, "p" + std::to_string(j)) << "outcomes in job order";
    EXPECT_EQ(out[j].results[0].device.name, "GPU-" + std::to_string(out[j].device));
    ++per_gpu[out[j].device];
  }
  EXPECT_GE(per_gpu[0], 1);
  EXPECT_GE(per_gpu[1], 1);
  EXPECT_EQ(per_gpu[0] + per_gpu[1], 12);
  EXPECT_EQ(rec.started.size(), 12u);
  EXPECT_EQ(rec.finished.size(), 12u);
  EXPECT_TRUE(rec.failed.empty());
  // One queue, taken in order: the jobs start in job order.
  for (std::size_t i = 0; i < rec.started.size(); ++i) EXPECT_EQ(rec.started[i].first, i);
}

TEST(MultiSweep, AFasterGpuTakesMoreJobs) {
  const std::vector<DeviceJob> jobs = jobs_for("H200", 10);
  // GPU 1 finishes its first job only once GPU 0 has finished every other one.
  std::mutex mu;
  std::condition_variable cv;
  int fast_done = 0;
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    std::unique_lock<std::mutex> lock(mu);
    if (d.ordinal == 1) {
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return fast_done == 9; });
    } else {
      ++fast_done;
      cv.notify_all();
    }
    return fake_result(job, d);
  };
  const auto out = sweep_on_devices(jobs, gpus({0, 1}), sweep);
  int slow = 0;
  for (const DeviceJobOutcome& o : out) {
    ASSERT_TRUE(o.swept());
    slow += o.device == 1;
  }
  EXPECT_LE(slow, 1);  // 0 when GPU 0 emptied the queue before GPU 1's thread looked
}

TEST(MultiSweep, JobsOfABrokenGpuAreSweptByAnotherAndItIsDropped) {
  const std::vector<DeviceJob> jobs = jobs_for("H200", 8);
  std::atomic<int> broken_calls{0};
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    if (d.ordinal == 1) {
      ++broken_calls;
      throw CudaError("cuCtxCreate failed: CUDA_ERROR_ECC_UNCORRECTABLE", 214, true);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return fake_result(job, d);
  };
  Recorder rec;
  const auto out = sweep_on_devices(jobs, gpus({0, 1}), sweep, rec.events());
  for (std::size_t j = 0; j < out.size(); ++j) {
    ASSERT_TRUE(out[j].swept()) << "job " << j << " was retried on GPU 0";
    EXPECT_EQ(out[j].device, 0);
    ASSERT_EQ(out[j].results.size(), 1u);
    for (const std::string& e : out[j].errors) {
      EXPECT_NE(e.find("GPU 1 (GPU-1): cuCtxCreate failed"), std::string::npos) << e;
    }
  }
  // Dropped after three failures in a row: it never tries more than three jobs.
  EXPECT_LE(broken_calls.load(), 3);
  EXPECT_EQ(static_cast<int>(rec.failed.size()), broken_calls.load());
  for (const auto& [job, gpu, again] : rec.failed) EXPECT_TRUE(again) << job;
  if (broken_calls.load() == 3) {
    EXPECT_EQ(rec.dropped, std::vector<int>{1});
  }
}

TEST(MultiSweep, AJobFailingOnEveryGpuIsReportedWithEachError) {
  const std::vector<DeviceJob> jobs = jobs_for("H200", 6);
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    if (job == 2) throw Error("worker: out of memory on GPU " + std::to_string(d.ordinal));
    return fake_result(job, d);
  };
  Recorder rec;
  const auto out = sweep_on_devices(jobs, gpus({0, 1}), sweep, rec.events());
  for (std::size_t j = 0; j < out.size(); ++j) {
    if (j == 2) continue;
    EXPECT_TRUE(out[j].swept()) << j;
  }
  EXPECT_FALSE(out[2].swept());
  EXPECT_TRUE(out[2].results.empty());
  ASSERT_EQ(out[2].errors.size(), 2u);  // tried once on each GPU, not more
  std::set<std::string> errors(out[2].errors.begin(), out[2].errors.end());
  EXPECT_EQ(errors, (std::set<std::string>{"GPU 0 (GPU-0): worker: out of memory on GPU 0",
                                           "GPU 1 (GPU-1): worker: out of memory on GPU 1"}));
  ASSERT_EQ(rec.failed.size(), 2u);
  EXPECT_TRUE(std::get<2>(rec.failed[0]));   // the first failure sends it to the other GPU
  EXPECT_FALSE(std::get<2>(rec.failed[1]));  // the second gives up
  EXPECT_TRUE(rec.dropped.empty());
}

TEST(MultiSweep, TheLastGpuOfAKindIsNeverDroppedAndItsFailuresAreReported) {
  const std::vector<DeviceJob> jobs = jobs_for("H100", 7);
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    if (job < 5) throw InvalidArgument("problem " + std::to_string(job) + " is bad");
    return fake_result(job, d);
  };
  Recorder rec;
  const auto out = sweep_on_devices(jobs, gpus({3}, "H100"), sweep, rec.events());
  for (std::size_t j = 0; j < 5; ++j) {
    EXPECT_FALSE(out[j].swept());
    ASSERT_EQ(out[j].errors.size(), 1u);
    EXPECT_EQ(out[j].errors[0], "GPU 3 (GPU-3): problem " + std::to_string(j) + " is bad");
  }
  EXPECT_TRUE(out[5].swept());
  EXPECT_TRUE(out[6].swept());
  EXPECT_TRUE(rec.dropped.empty());
}

TEST(MultiSweep, EachKindOfGpuSweepsItsOwnJobs) {
  // GPUs 0 and 2 are one kind, GPU 1 another: best rows are keyed by device, so each kind
  // sweeps every problem once and never another kind's.
  std::vector<SweepDevice> devices = {{0, "H100", "H100-0"}, {1, "A100", "A100-1"},
                                      {2, "H100", "H100-2"}};
  std::vector<DeviceJob> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back({"H100", "h100 " + std::to_string(i)});
    jobs.push_back({"A100", "a100 " + std::to_string(i)});
  }
  std::mutex mu;
  std::map<std::size_t, int> calls;
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    {
      std::lock_guard<std::mutex> l(mu);
      ++calls[job];
    }
    if (d.key != jobs[job].device_key) throw std::logic_error("wrong kind");
    return fake_result(job, d);
  };
  const auto out = sweep_on_devices(jobs, devices, sweep);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    ASSERT_TRUE(out[j].swept()) << j;
    EXPECT_EQ(calls[j], 1) << j;
    if (jobs[j].device_key == "A100") {
      EXPECT_EQ(out[j].device, 1);
    } else {
      EXPECT_TRUE(out[j].device == 0 || out[j].device == 2);
    }
  }
}

TEST(MultiSweep, StopLeavesTheRestUnsweptAndTheQueueDrains) {
  const std::vector<DeviceJob> jobs = jobs_for("H200", 20);
  std::atomic<int> taken{0};
  const SweepOnDevice sweep = [&](std::size_t job, const SweepDevice& d) {
    ++taken;
    return fake_result(job, d);
  };
  DeviceRunOptions options;
  options.stop = [&] { return taken.load() >= 4; };  // a time limit reached after four jobs
  const auto out = sweep_on_devices(jobs, gpus({0, 1}), sweep, {}, options);
  int swept = 0;
  for (const DeviceJobOutcome& o : out) {
    swept += o.swept();
    if (!o.swept()) {
      EXPECT_TRUE(o.errors.empty()) << "a job left by the time limit did not fail";
    }
  }
  EXPECT_GE(swept, 4);
  EXPECT_LE(swept, 5);  // the other GPU may have taken one as the fourth finished
  EXPECT_EQ(swept, taken.load());
}

TEST(MultiSweep, NoJobsAndBadInput) {
  const SweepOnDevice never = [](std::size_t, const SweepDevice&) -> std::vector<SweepResult> {
    throw std::logic_error("not called");
  };
  EXPECT_TRUE(sweep_on_devices({}, gpus({0}), never).empty());
  try {
    sweep_on_devices(jobs_for("A100", 1), gpus({0, 1}), never);
    ADD_FAILURE() << "a job for a kind without a GPU was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU of the kind \"A100\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(sweep_on_devices(jobs_for("H200", 1), gpus({0, 0}), never), InvalidArgument);
}

// ---- the compile cache, shared by two compile pools ----

TEST(SharedCompileCache, TwoCompilersOnOneDirectoryBuildEachKernelOnce) {
  const fs::path dir = fs::temp_directory_path() / ("ktune-multi-sweep-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::atomic<int> builds{0};
  // A builder that takes a while, so that both compilers ask for each kernel at once.
  const Compiler::Builder slow = [&](const CompileJob& job) {
    ++builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CompiledKernel k;
    k.lowered_name = "lowered_" + job.source.name_expression;
    k.cubin = "cubin of " + job.source.name_expression;
    return k;
  };
  const Compiler a(dir, slow), b(dir, slow);
  ASSERT_TRUE(a.cache_disabled_reason().empty()) << a.cache_disabled_reason();
  std::vector<CompileJob> jobs;
  for (int i = 0; i < 6; ++i) {
    CompileJob job;
    job.arch = "sm_90a";
    job.source.name_expression = "kernel<" + std::to_string(i) + ">";
    job.source_text = "template <int N> __global__ void kernel() {}";
    jobs.push_back(job);
  }
  std::mutex mu;
  std::map<std::string, std::set<std::string>> cubins;  // name -> every cubin seen for it
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const Compiler& c = t % 2 == 0 ? a : b;
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        const CompileJob& job = jobs[(i + static_cast<std::size_t>(t)) % jobs.size()];
        const CompiledKernel k = c.compile(job);
        std::lock_guard<std::mutex> l(mu);
        cubins[job.source.name_expression].insert(k.cubin);
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(builds.load(), 6) << "each kernel built once, the others read it from the cache";
  ASSERT_EQ(cubins.size(), 6u);
  for (const auto& [name, seen] : cubins) EXPECT_EQ(seen, std::set<std::string>{"cubin of " + name});
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  fs::remove_all(dir);
}

TEST(Retime, RoundsAlternateDirectionSoNoLeaderIsAlwaysTimedFirst) {
  using V = std::vector<std::size_t>;
  EXPECT_EQ(retime_order(3, 0), (V{0, 1, 2}));
  EXPECT_EQ(retime_order(3, 1), (V{2, 1, 0}));
  EXPECT_EQ(retime_order(3, 2), (V{0, 1, 2}));
  EXPECT_EQ(retime_order(1, 1), (V{0}));
  EXPECT_TRUE(retime_order(0, 0).empty());
}

TEST(Retime, MedianOfRoundsIgnoresOneOutlyingRound) {
  // One round slowed by a clock dip (or sped up by a lucky spell) does not move the result.
  EXPECT_DOUBLE_EQ(median_of_rounds({513.0, 539.0, 512.0}), 513.0);
  EXPECT_DOUBLE_EQ(median_of_rounds({400.0, 512.0, 515.0}), 512.0);
  EXPECT_DOUBLE_EQ(median_of_rounds({10.0, 12.0}), 11.0);  // a leader that failed one round
  EXPECT_DOUBLE_EQ(median_of_rounds({7.5}), 7.5);
  EXPECT_DOUBLE_EQ(median_of_rounds({}), 0.0);
}

}  // namespace
