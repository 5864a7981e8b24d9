// ktune: autotuned GPU kernels. Only this file turns exceptions into messages and exit codes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <boost/program_options/errors.hpp>

#include "cli/cli.hpp"
#include "cli/output.hpp"
#include "ktune/error.hpp"
#include "runtime/core/types.hpp"
#include "tuner/compile_child.hpp"
#include "tuner/protocol.hpp"

namespace {

void usage() {
  std::printf(
      "ktune: tunes GPU kernels (flash attention, decode attention, Mixture-of-Experts layers,\n"
      "fused norms, activations and softmax) for this GPU and stores the best configurations\n"
      "in a database that the ktune runtime dispatches from.\n\n"
      "usage: ktune <command> [options]     (ktune <command> --help, or ktune help <command>)\n\n"
      "commands:\n");
  for (const ktune::cli::Command& c : ktune::cli::commands())
    std::printf("  %-9s %s\n", c.name, c.summary);
  std::printf(
      "\ndatabase: --db PATH on every command, else $KTUNE_DB, else the user's data directory;\n"
      "read-only databases shipped with ktune (and any in $KTUNE_DB_PATH) sit under it.\n");
}

// A closed standard descriptor would be handed to the next file opened (a database, an export),
// and output meant for the terminal would land in it. Fill each with /dev/null, read-only, so
// that writing to a closed standard output fails and is reported like any write error.
void reserve_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int got = ::open("/dev/null", O_RDONLY);
    if (got >= 0 && got != fd) {  // cannot happen (lowest free descriptor), but never leave fd free
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

// Every command's output is checked once, at the end: a full disk, a closed or read-only
// standard output is a failure with its reason, not a silent exit 0.
int finish(const char* who, int code) {
  // std::cout shares stdout's buffer (sync_with_stdio): flush stdout first, while errno still
  // says why a write failed.
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int err = errno;
  std::cout.flush();
  if (!flush_failed && !std::ferror(stdout) && std::cout.good()) return code;
  std::fprintf(stderr, "%s: cannot write standard output: %s\n", who,
               err != 0 ? std::strerror(err) : "write error");
  return code == 0 ? 1 : code;
}

int run(const ktune::cli::Command& c, const ktune::cli::Args& args) {
  using ktune::cli::shown;
  // One line per error: printable (no terminal escapes from values) and bounded in length.
  const auto say = [&](const std::string& what) {
    std::fprintf(stderr, "ktune %s: %s\n", c.name, shown(what, 800).c_str());
  };
  try {
    return c.run(args);
  } catch (const ktune::cli::UsageError& e) {
    say(e.message);
    return 2;
  } catch (const boost::program_options::error& e) {
    say(std::string(e.what()) + " (see ktune " + c.name + " --help)");
    return 2;
  } catch (const ktune::InvalidArgument& e) {
    say(e.what());
    return 2;
  } catch (const ktune::NoDevice& e) {
    say(std::string("no CUDA device found: ") + e.what());
    return 3;
  } catch (const ktune::DatabaseError& e) {
    say(std::string("database error: ") + e.what());
    return 4;
  } catch (const ktune::CompileError& e) {
    say(e.what());
    std::fprintf(stderr, "%s\n", e.log().c_str());
    return 5;
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
}

const ktune::cli::Command* find_command(const std::string& name) {
  for (const ktune::cli::Command& c : ktune::cli::commands())
    if (name == c.name) return &c;
  return nullptr;
}

int unknown_command(const std::string& name) {
  std::fprintf(stderr, "ktune: unknown command %s (commands:", ktune::quoted(name).c_str());
  for (const ktune::cli::Command& c : ktune::cli::commands()) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, "; see ktune --help)\n");
  return 2;
}

int dispatch(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      (std::strcmp(argv[1], "help") == 0 && argc == 2)) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "help") == 0) {  // ktune help <command>: that command's --help
    if (argc > 3) {
      std::fprintf(stderr, "ktune help: expected one command name (see ktune --help)\n");
      return 2;
    }
    const ktune::cli::Command* c = find_command(argv[2]);
    return c ? run(*c, {"--help"}) : unknown_command(argv[2]);
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("ktune 0.1.0\n");
    return 0;
  }
  const ktune::cli::Command* c = find_command(argv[1]);
  return c ? run(*c, ktune::cli::Args(argv + 2, argv + argc)) : unknown_command(argv[1]);
}

}  // namespace

int main(int argc, char** argv) {
  reserve_standard_descriptors();
  // With a CUDA driver present, NVRTC may take machine code from the driver's compute cache and
  // then return an empty ptxas log: registers and shared memory would read as 0 and the resource
  // checks of the sweep would pass everything. ktune keeps its own cache of compiled kernels.
  ::setenv("CUDA_CACHE_DISABLE", "1", 1);
  if (argc >= 2 && std::strcmp(argv[1], "__worker") == 0) {
    // The benchmark worker: requests on fd 3, replies on fd 4 (see tuner/worker_client.cpp).
    try {
      return ktune::worker_main(3, 4);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ktune worker: %s\n", e.what());
      return 1;
    }
  }
  if (argc >= 2 && std::strcmp(argv[1], "__compile") == 0) {
    // One NVRTC compile under the parent's time limit: a job on fd 3, the reply on fd 4 (see
    // tuner/compile_child.cpp). It reports every failure in its reply.
    return ktune::compile_child_main(3, 4);
  }
  const std::string who = argc >= 2 && find_command(argv[1]) ? "ktune " + std::string(argv[1]) : "ktune";
  // Output to a file or pipe is held in one large buffer, so that a failing write happens in
  // finish()'s flush, where errno still says why (a smaller buffer fails mid-command and the
  // reason is lost by the time the command ends).
  static char out_buffer[1 << 20];
  if (!::isatty(STDOUT_FILENO)) std::setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  return finish(who.c_str(), dispatch(argc, argv));
}
