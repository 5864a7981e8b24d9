#include "tuner/compile_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "ktune/error.hpp"
#include "runtime/core/types.hpp"
#include "tuner/protocol.hpp"

extern char** environ;

namespace ktune {
namespace {

using Clock = std::chrono::steady_clock;

// A compile child reads exactly one frame of this type and answers with reply_ok or reply_error.
constexpr auto kCompileJob = MessageType::compile;
// Names the payload layout, so that a child from another ktune build refuses the job clearly.
constexpr const char* kJobFormat = "ktune compile job 1";
constexpr std::uint64_t kMaxReplyBytes = std::uint64_t{1} << 32;

enum class Failure : std::uint64_t { compile = 1, invalid_argument = 2, other = 3 };

std::string describe(const CompileJob& job) {
  return job.source.name_expression + " for " + job.arch;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A started child and the parent's ends of its pipes. Whatever way the compile ends, the child
// is killed and reaped: no child outlives compile_in_child.
class Child {
 public:
  Child() = default;
  ~Child() {
    kill_and_reap();
    close_fd(to);
    close_fd(from);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int kill_and_reap() {
    if (pid <= 0) return 0;
    ::kill(pid, SIGKILL);
    return reap();
  }
  int reap() {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    return status;
  }

  pid_t pid = -1;
  int to = -1;    // the child's fd 3
  int from = -1;  // the child's fd 4
};

// A pipe end moved above the standard range and the child's 3 and 4, close-on-exec: dup2 onto
// an equal number would keep close-on-exec, and a concurrently spawned child (another compile
// thread) must not inherit it.
int high_fd(int fd) {
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return high;
}

void spawn(Child& c, const std::vector<std::string>& command) {
  if (command.empty() || command[0].empty())
    throw InvalidArgument("no compile child command given");
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int& fd : in) close_fd(fd);
    throw Error(std::string("cannot create pipes for the compile child: ") + std::strerror(e));
  }
  for (int* fd : {&in[0], &in[1], &out[0], &out[1]}) *fd = high_fd(*fd);
  struct Ends {
    int* fds[4];
    ~Ends() {
      for (int* fd : fds) close_fd(*fd);
    }
  } ends{{&in[0], &in[1], &out[0], &out[1]}};
  for (int* fd : ends.fds) {
    if (*fd < 0)
      throw Error(std::string("cannot set up the compile child's pipes: ") + std::strerror(errno));
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 3);
  posix_spawn_file_actions_adddup2(&fa, out[1], 4);
  // The child starts with no signal blocked and SIGPIPE at its default, whatever this thread has.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, pipe_only;
  sigemptyset(&none);
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &pipe_only);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = command;
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // With a CUDA driver installed, NVRTC takes SASS from the driver's compute cache when it has
  // seen the PTX before, and then returns an empty ptxas log: registers, shared memory and
  // spills would all read 0 and resource checks would pass anything. ktune caches CUBINs with
  // their logs itself, so the child compiles without the driver's cache.
  std::string no_driver_cache = "CUDA_CACHE_DISABLE=1";
  std::vector<char*> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "CUDA_CACHE_DISABLE=", 19) != 0) envp.push_back(*e);
  envp.push_back(no_driver_cache.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    throw Error("cannot start the compile child " + quoted(command[0], 256) + ": " +
                std::strerror(rc));
  }
  c.pid = pid;
  c.to = std::exchange(in[1], -1);
  c.from = std::exchange(out[0], -1);
}

// Milliseconds left before `deadline`, at least 0, for poll().
int left_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count() + 1, 0, 1000 * 1000));
}

// Writes `data` to a non-blocking pipe before `deadline`. Returns false when the deadline passed;
// true when written or when the child is gone (its exit is then read like any other end).
// SIGPIPE is blocked in this thread meanwhile, and one raised by this write is consumed, so that
// a child that died early cannot kill the parent and no process-wide setting is needed.
bool send_before(int fd, std::string_view data, Clock::time_point deadline) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  bool ok = true;
  bool broken = false;
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      const int ms = left_ms(deadline);
      if (ms == 0) {
        ok = false;
        break;
      }
      ::poll(&p, 1, ms);
      continue;
    }
    broken = true;  // EPIPE: the child is gone
    break;
  }
  if (broken && !was_pending) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

enum class Received { frame, eof, deadline };

// Reads one frame (u32 type, u64 length, payload: protocol.hpp's framing) before `deadline`.
Received receive_before(int fd, Clock::time_point deadline, MessageType& type,
                        std::string& payload) {
  std::string buf;
  char chunk[65536];
  for (;;) {
    if (buf.size() >= 12) {
      std::uint32_t t = 0;
      std::uint64_t n = 0;
      std::memcpy(&t, buf.data(), 4);
      std::memcpy(&n, buf.data() + 4, 8);
      if (n > kMaxReplyBytes) throw Error("the compile child sent a malformed reply");
      if (buf.size() - 12 >= n) {
        type = static_cast<MessageType>(t);
        payload = buf.substr(12, static_cast<std::size_t>(n));
        return Received::frame;
      }
    }
    pollfd p{fd, POLLIN, 0};
    const int ms = left_ms(deadline);
    if (ms == 0) return Received::deadline;
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno));
    if (r <= 0) continue;
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return Received::eof;
    buf.append(chunk, static_cast<std::size_t>(got));
  }
}

// Waits for a child that closed its pipe to exit; nullopt when it is still running at `deadline`.
std::optional<int> exit_status(Child& c, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      c.pid = -1;
      return status;
    }
    if (r < 0 && errno != EINTR) return c.kill_and_reap();  // cannot happen: it is our child
    if (Clock::now() >= deadline) return std::nullopt;
    ::usleep(1000);
  }
}

void encode_job(Encoder& e, const CompileJob& job) {
  e.str(job.arch).str(job.source.file).str(job.source.name_expression).str(job.source_text);
}

CompileJob decode_job(Decoder& d) {
  CompileJob job;
  job.arch = d.str();
  job.source.file = d.str();
  job.source.name_expression = d.str();
  job.source_text = d.str();
  return job;
}

void encode_kernel(Encoder& e, const CompiledKernel& k) {
  e.str(k.lowered_name).str(k.cubin).str(k.log);
  for (int v : {k.resources.registers, k.resources.shared_bytes, k.resources.local_bytes,
                k.resources.spill_stores, k.resources.spill_loads}) {
    e.i64(v);
  }
}

CompiledKernel decode_kernel_reply(Decoder& d) {
  CompiledKernel k;
  k.lowered_name = d.str();
  k.cubin = d.str();
  k.log = d.str();
  int* fields[] = {&k.resources.registers, &k.resources.shared_bytes, &k.resources.local_bytes,
                   &k.resources.spill_stores, &k.resources.spill_loads};
  for (int* f : fields) *f = static_cast<int>(d.i64());
  return k;
}

}  // namespace

std::vector<std::string> default_compile_command() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find this executable to start the compile child");
  return {std::string(buf, static_cast<std::size_t>(n)), "__compile"};
}

CompiledKernel compile_in_child(const std::vector<std::string>& command, const CompileJob& job,
                                double timeout_s) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s)) {
    throw InvalidArgument("compile time limit " + seconds_text(timeout_s) +
                          " s is not allowed: expected a finite number of seconds above 0");
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const auto stopped = [&] {
    return CompileTimeout("NVRTC did not finish compiling " + describe(job) + " within " +
                              seconds_text(timeout_s) +
                              " s (the compile time limit); the compile was stopped",
                          "");
  };

  Child child;
  spawn(child, command);
  Encoder request;
  request.str(kJobFormat).i64(::getpid());
  encode_job(request, job);
  std::string frame(12, '\0');
  const auto type = static_cast<std::uint32_t>(kCompileJob);
  const std::uint64_t size = request.bytes().size();
  std::memcpy(frame.data(), &type, 4);
  std::memcpy(frame.data() + 4, &size, 8);
  frame += request.bytes();
  ::fcntl(child.to, F_SETFL, ::fcntl(child.to, F_GETFL) | O_NONBLOCK);
  if (!send_before(child.to, frame, deadline)) throw stopped();  // ~Child kills and reaps
  close_fd(child.to);

  MessageType reply_type{};
  std::string reply;
  const Received got = receive_before(child.from, deadline, reply_type, reply);
  if (got == Received::deadline) throw stopped();
  if (got == Received::eof) {
    const std::optional<int> ended = exit_status(child, deadline);
    if (!ended) throw stopped();
    const int status = *ended;
    if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      throw CompileError("the compile child for " + describe(job) + " was killed by signal " +
                             std::to_string(sig) + " (" + strsignal(sig) + ") before replying",
                         "");
    }
    throw Error("the compile child " + quoted(command[0], 256) + " exited with status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                " without a reply (is it a ktune binary that knows __compile?)");
  }
  // The reply is complete: nothing the child does from here on matters.
  child.kill_and_reap();

  Decoder d(reply);
  if (reply_type == MessageType::reply_ok) {
    CompiledKernel k = decode_kernel_reply(d);
    k.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return k;
  }
  if (reply_type != MessageType::reply_error)
    throw Error("the compile child sent a malformed reply");
  const auto failure = static_cast<Failure>(d.u64());
  std::string message = d.str();
  std::string log = d.str();
  switch (failure) {
    case Failure::compile: throw CompileError(message, std::move(log));
    case Failure::invalid_argument: throw InvalidArgument(message);
    case Failure::other: break;
  }
  throw Error("the compile child failed: " + message);
}

Compiler::Builder child_builder(std::vector<std::string> command, double timeout_s) {
  return [command = std::move(command), timeout_s](const CompileJob& job) {
    return compile_in_child(command, job, timeout_s);
  };
}

int compile_child_main(int in_fd, int out_fd) {
  // Dies with the parent: a tuner killed mid-sweep must not leave a compile running for minutes.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  MessageType type{};
  std::string payload;
  try {
    if (!read_frame(in_fd, type, payload)) return 1;
  } catch (const std::exception&) {
    return 1;
  }
  Encoder reply;
  MessageType reply_type = MessageType::reply_ok;
  const auto failed = [&](Failure f, const std::string& message, const std::string& log) {
    reply = Encoder();
    reply.u64(static_cast<std::uint64_t>(f)).str(message).str(log);
    reply_type = MessageType::reply_error;
  };
  try {
    Decoder d(payload);
    if (type != kCompileJob || d.str() != kJobFormat) {
      throw Error("the job is not in this build's format (" + std::string(kJobFormat) +
                  "): parent and child are different ktune builds");
    }
    // The parent may have died before PR_SET_PDEATHSIG took effect (a wrapper in the command
    // makes getppid() differ while the parent lives).
    const auto parent = static_cast<pid_t>(d.i64());
    if (::getppid() != parent && ::kill(parent, 0) != 0 && errno == ESRCH) return 1;
    const CompileJob job = decode_job(d);
    encode_kernel(reply, Compiler(std::nullopt).compile(job));
  } catch (const CompileError& e) {
    failed(Failure::compile, e.what(), e.log());
  } catch (const InvalidArgument& e) {
    failed(Failure::invalid_argument, e.what(), {});
  } catch (const std::exception& e) {
    failed(Failure::other, e.what(), {});
  }
  try {
    write_frame(out_fd, reply_type, reply.bytes());
  } catch (const std::exception&) {
    return 1;
  }
  return 0;
}

}  // namespace ktune
