#include "tuner/worker_client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "ktune/error.hpp"

extern char** environ;

namespace ktune {
namespace {

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return "worker killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "worker exited with status " + std::to_string(WEXITSTATUS(status));
  return "worker ended";
}

}  // namespace

WorkerClient::WorkerClient(std::vector<std::string> command, int device_ordinal)
    : command_(std::move(command)), ordinal_(device_ordinal) {
  // A worker that dies mid-write must not kill the parent with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
}

WorkerClient::~WorkerClient() {
  try {
    stop(false);
  } catch (...) {
  }
}

void WorkerClient::start() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create worker pipes: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 3);
  posix_spawn_file_actions_adddup2(&fa, out[1], 4);
  std::vector<char*> argv;
  for (std::string& s : command_) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    throw Error("cannot start the benchmark worker " + command_[0] + ": " + std::strerror(rc));
  }
  pid_ = pid;
  to_worker_ = in[1];
  from_worker_ = out[0];
  problem_sent_ = false;
  ++starts_;
}

void WorkerClient::stop(bool kill_now) {
  if (pid_ < 0) return;
  if (!kill_now) {
    try {
      write_frame(to_worker_, MessageType::shutdown, {});
    } catch (...) {
      kill_now = true;
    }
  }
  if (kill_now) kill(pid_, SIGKILL);
  close(to_worker_);
  close(from_worker_);
  int status = 0;
  // Give a polite shutdown a few seconds, then kill.
  for (int i = 0; i < 300 && !kill_now; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    usleep(10000);
  }
  if (pid_ >= 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  to_worker_ = from_worker_ = -1;
  problem_sent_ = false;
}

WorkerEnd WorkerClient::request(MessageType type, const std::string& payload, double timeout_s,
                                MessageType& reply_type, std::string& reply, std::string& detail) {
  try {
    write_frame(to_worker_, type, payload);
  } catch (const Error&) {
    // The worker is gone; fall through to collect its exit status.
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      kill(pid_, SIGKILL);
      stop(true);
      detail = "no reply within " + std::to_string(timeout_s) + " s; worker killed";
      return WorkerEnd::timed_out;
    }
    pollfd p{from_worker_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno));
    if (r > 0) break;
  }
  bool got = false;
  try {
    got = read_frame(from_worker_, reply_type, reply);
  } catch (const Error&) {
    got = false;
  }
  if (!got) {
    int status = 0;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    detail = describe_exit(status);
    close(to_worker_);
    close(from_worker_);
    pid_ = -1;
    to_worker_ = from_worker_ = -1;
    problem_sent_ = false;
    return WorkerEnd::crashed;
  }
  return WorkerEnd::replied;
}

const DeviceInfo& WorkerClient::device() {
  if (pid_ < 0) {
    start();
    Encoder e;
    e.i64(ordinal_);
    MessageType t;
    std::string reply, detail;
    WorkerEnd end = request(MessageType::hello, e.bytes(), 60.0, t, reply, detail);
    if (end != WorkerEnd::replied)
      throw Error("the benchmark worker failed to start: " + detail);
    Decoder d(reply);
    if (t == MessageType::reply_error) {
      std::string msg = d.str();
      stop(false);
      throw NoDevice(msg);
    }
    device_ = decode_device(d);
  }
  return *device_;
}

void WorkerClient::ensure_ready(double timeout_s) {
  device();
  if (problem_payload_ && !problem_sent_) {
    MessageType t;
    std::string reply, detail;
    WorkerEnd end = request(MessageType::set_problem, *problem_payload_, timeout_s, t, reply, detail);
    if (end != WorkerEnd::replied) throw Error("setting up the problem in the worker failed: " + detail);
    if (t == MessageType::reply_error) {
      Decoder d(reply);
      throw Error("setting up the problem in the worker failed: " + d.str());
    }
    problem_sent_ = true;
  }
}

double WorkerClient::measure_copy(double timeout_s) {
  device();
  MessageType t;
  std::string reply, detail;
  if (request(MessageType::measure_copy, {}, timeout_s, t, reply, detail) != WorkerEnd::replied)
    throw Error("measuring copy bandwidth failed: " + detail);
  Decoder d(reply);
  if (t == MessageType::reply_error) throw Error("measuring copy bandwidth failed: " + d.str());
  return d.f64();
}

void WorkerClient::set_problem(const ProblemRequest& r, double timeout_s) {
  Encoder e;
  encode(e, r);
  problem_payload_ = e.bytes();
  problem_sent_ = false;
  ensure_ready(timeout_s);
}

WorkerClient::Outcome WorkerClient::evaluate(const EvaluateRequest& r, double timeout_s) {
  ensure_ready(120.0);
  Encoder e;
  encode(e, r);
  Outcome o;
  MessageType t;
  std::string reply;
  o.end = request(MessageType::evaluate, e.bytes(), timeout_s, t, reply, o.detail);
  if (o.end != WorkerEnd::replied) return o;
  Decoder d(reply);
  if (t == MessageType::reply_error) {
    o.evaluation.status = EvalStatus::launch_error;
    o.evaluation.detail = d.str();
    return o;
  }
  o.evaluation = decode_evaluation(d);
  if (o.evaluation.worker_exits) stop(true);
  return o;
}

}  // namespace ktune
