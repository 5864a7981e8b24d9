// A tuner stand-in for db_test: records `count` trials over a few shared problem keys, the way a
// sweep does (one commit per trial), resuming past trials it already finds in the database.
//   db_writer <db path> <writer id> <count> [--progress]
// Trial i of writer w has params_key "w<w>-<i>", a detail and status that follow from (w, i), and
// a median fixed by a hash of (w, i), so the test can check every row. --progress prints a line
// per committed trial, for the test to kill it mid-run. Exit status: 0 done, 1 error (message on
// stderr), 2 usage.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>

#include "db/store.hpp"
#include "runtime/core/types.hpp"

namespace {

constexpr int kProblems = 5;  // problem keys "n=0".."n=4", shared by every writer

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  const bool progress = argc == 5 && std::string(argv[4]) == "--progress";
  if (argc != 4 && !progress) {
    std::fprintf(stderr, "usage: db_writer <db path> <writer id> <count> [--progress]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int writer = std::atoi(argv[2]);
  const int count = std::atoi(argv[3]);
  try {
    ktune::Store store = ktune::Store::open(path, ktune::Store::Mode::read_write);
    const ktune::DeviceInfo device = *ktune::device_for_arch("sm_90a");
    store.upsert_device(device);
    ktune::SweepRecord sweep;
    sweep.device_key = device.key();
    sweep.op = "rmsnorm";
    sweep.dtype = ktune::DType::bf16;
    sweep.problem_key = "n=*";
    sweep.strategy = "writer " + std::to_string(writer);
    sweep.command_line = std::string(argv[0]) + " " + argv[1] + " " + argv[2] + " " + argv[3];
    const std::int64_t sweep_id = store.begin_sweep(sweep);

    std::set<std::string> done;  // what a resumed sweep skips
    for (int p = 0; p < kProblems; ++p)
      for (const ktune::TrialRecord& t : store.trials(device.key(), "rmsnorm", ktune::DType::bf16,
                                                      "n=" + std::to_string(p), "h1").rows)
        done.insert(t.params_key);

    for (int i = 0; i < count; ++i) {
      ktune::TrialRecord t;
      t.params_key = "w" + std::to_string(writer) + "-" + std::to_string(i);
      if (done.count(t.params_key) != 0) continue;
      const std::uint64_t h =
          mix(static_cast<std::uint64_t>(writer) * 1000003u + static_cast<std::uint64_t>(i));
      t.sweep_id = sweep_id;
      t.device_key = device.key();
      t.op = "rmsnorm";
      t.dtype = ktune::DType::bf16;
      t.problem_key = "n=" + std::to_string(i % kProblems);
      t.template_hash = "h1";
      t.nvrtc_version = 13000;
      t.detail = "writer " + std::to_string(writer) + " trial " + std::to_string(i);
      // Every 7th fails to compile; every 3rd is wrong but "fast": neither may become the best.
      if (i % 7 == 3) {
        t.status = ktune::TrialStatus::compile_error;
      } else if (i % 3 == 1) {
        t.status = ktune::TrialStatus::wrong_result;
        t.median_us = 0.25;
      } else {
        t.median_us = 1.0 + static_cast<double>(h % 100000) / 100.0;
        t.min_us = t.median_us * 0.9;
        t.max_us = t.median_us * 1.2;
        t.repetitions = 10;
      }
      store.record_trial(t);
      if (progress) {
        std::printf("%d\n", i);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "db_writer %d: %s\n", writer, e.what());
    return 1;
  }
  return 0;
}
