// The progress lines of sweeps over one or several GPUs (cli/sweep_devices.cpp), driven by the
// events the scheduler sends, without a GPU: one GPU keeps a single sweep's lines; several name
// their GPU, keep each problem's number when it is tried again, and count done and left.
#include "cli/sweep_devices.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace ktune::cli {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

DeviceSweepJob job(const std::string& what, std::vector<std::string> keys) {
  DeviceSweepJob j;
  j.device_key = "H200";
  j.what = what;
  j.problem_keys = std::move(keys);
  return j;
}

SweepProgress candidate(const std::string& problem, std::size_t index, std::size_t problems,
                        std::size_t done) {
  SweepProgress p;
  p.problem = problem;
  p.problem_index = index;
  p.problems = problems;
  p.done = done;
  p.total = 10;
  p.params = "threads=64";
  p.median_us = 3.5;
  p.best_us = 3.5;
  p.phase = "evaluate";
  return p;
}

TEST(SweepBoard, SeveralGpusNameTheirGpuAndKeepNumbersOnRetry) {
  const std::vector<SweepDevice> gpus = {{0, "H200", "NVIDIA H200"}, {1, "H200", "NVIDIA H200"}};
  const std::vector<DeviceSweepJob> jobs = {job("add_rmsnorm bf16 ", {"m=64,n=4096"}),
                                            job("softmax bf16 ", {"m=256,n=1024"}),
                                            job("swiglu bf16 ", {"m=16,n=4096"})};
  SweepBoard board("plan: ", gpus, /*tty=*/false, 4, 1, nullptr);
  board.set_jobs(&jobs);
  testing::internal::CaptureStderr();
  board.line("plan: skipping layernorm bf16 m=1,n=64: its best is in the database");
  board.started(0, gpus[0]);
  board.started(1, gpus[1]);
  board.progress(0, 0, candidate("m=64,n=4096", 0, 1, 1));
  board.failed(1, gpus[1], "worker crashed", true);
  board.finished(0, gpus[0]);
  board.started(1, gpus[0]);
  board.finished(1, gpus[0]);
  board.started(2, gpus[1]);
  board.failed(2, gpus[1], "out of memory", false);
  board.dropped(gpus[1], "failed 3 jobs in a row");
  board.close();
  const std::vector<std::string> l = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(l.size(), 9u);
  EXPECT_EQ(l[0], "plan: skipping layernorm bf16 m=1,n=64: its best is in the database");
  EXPECT_EQ(l[1], "plan: problem 2/4 on GPU 0: add_rmsnorm bf16 m=64,n=4096 (1 done, 3 left, "
                  "time left known after the first problem)");
  EXPECT_EQ(l[2], "plan: problem 3/4 on GPU 1: softmax bf16 m=256,n=1024 (1 done, 3 left, "
                  "time left known after the first problem)");
  EXPECT_EQ(l[3], "GPU 0: [1/10] threads=64: ok 3.50 us");
  EXPECT_EQ(l[4], "plan: problem 3/4 on GPU 1: softmax bf16 m=256,n=1024 failed: worker "
                  "crashed; another GPU of its kind tries it");
  // Tried again on GPU 0 under its own number; one problem swept so far gives a time left.
  EXPECT_EQ(l[5].rfind("plan: problem 3/4 on GPU 0: softmax bf16 m=256,n=1024 (2 done, 2 left, "
                       "about ", 0), 0u) << l[5];
  EXPECT_EQ(l[6].rfind("plan: problem 4/4 on GPU 1: swiglu bf16 m=16,n=4096 (3 done, 1 left, ", 0),
            0u) << l[6];
  EXPECT_EQ(l[7], "plan: problem 4/4 on GPU 1: swiglu bf16 m=16,n=4096 failed: out of memory");
  EXPECT_EQ(l[8], "GPU 1 (NVIDIA H200) takes no more problems: failed 3 jobs in a row");
}

TEST(SweepBoard, OneGpuKeepsASingleSweepsLines) {
  const std::vector<SweepDevice> gpu = {{0, "H100", "NVIDIA H100"}};
  // A plan line with three buckets swept in one job (one worker start).
  const std::vector<DeviceSweepJob> jobs = {
      job("moe bf16 ", {"e=8,k=2,h=1024,i=2048,t=1", "e=8,k=2,h=1024,i=2048,t=16",
                        "e=8,k=2,h=1024,i=2048,t=64"}),
      job("swiglu bf16 ", {"m=16,n=4096"})};
  std::vector<std::string> single;  // the candidates the single-sweep printer got
  SweepBoard board("plan: ", gpu, false, 4, 0,
                   [&](const SweepProgress& p) { single.push_back(candidate_line(p)); });
  board.set_jobs(&jobs);
  testing::internal::CaptureStderr();
  board.started(0, gpu[0]);
  board.progress(0, 0, candidate("e=8,k=2,h=1024,i=2048,t=1", 0, 3, 1));
  board.progress(0, 0, candidate("e=8,k=2,h=1024,i=2048,t=16", 1, 3, 1));
  // The time limit stops the line in its second bucket: the third counts as done (not measured).
  board.finished(0, gpu[0]);
  board.started(1, gpu[0]);
  board.finished(1, gpu[0]);
  const std::vector<std::string> l = lines_of(testing::internal::GetCapturedStderr());
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], "plan: problem 1/4: moe bf16 e=8,k=2,h=1024,i=2048,t=1 (0 done, 4 left, time "
                  "left known after the first problem)");
  EXPECT_EQ(l[1].rfind("plan: problem 2/4: moe bf16 e=8,k=2,h=1024,i=2048,t=16 (1 done, 3 left, about ", 0),
            0u) << l[1];
  EXPECT_EQ(l[2].rfind("plan: problem 4/4: swiglu bf16 m=16,n=4096 (3 done, 1 left, about ", 0), 0u)
      << l[2];
  ASSERT_EQ(single.size(), 2u);
  EXPECT_EQ(single[0], "[problem 1/3 e=8,k=2,h=1024,i=2048,t=1] [1/10] threads=64: ok 3.50 us");
}

}  // namespace
}  // namespace ktune::cli
