// ktune: autotuned GPU kernels. Only this file turns exceptions into messages and exit codes.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <boost/program_options/errors.hpp>

#include "cli/cli.hpp"
#include "ktune/error.hpp"
#include "tuner/protocol.hpp"

namespace {

void usage() {
  std::printf(
      "ktune: tunes GPU kernels (fused norms and activations, softmax) for this GPU and stores\n"
      "the best configurations in a database that the ktune runtime dispatches from.\n\n"
      "usage: ktune <command> [options]     (ktune <command> --help for its options)\n\n"
      "commands:\n");
  for (const ktune::cli::Command& c : ktune::cli::commands())
    std::printf("  %-9s %s\n", c.name, c.summary);
  std::printf(
      "\ndatabase: --db PATH on every command, else $KTUNE_DB, else the user's data directory;\n"
      "read-only databases shipped with ktune (and any in $KTUNE_DB_PATH) sit under it.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "__worker") == 0) {
    // The benchmark worker: requests on fd 3, replies on fd 4 (see tuner/worker_client.cpp).
    try {
      return ktune::worker_main(3, 4);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ktune worker: %s\n", e.what());
      return 1;
    }
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("ktune 0.1.0\n");
    return 0;
  }
  const std::string name = argv[1];
  ktune::cli::Args args(argv + 2, argv + argc);
  for (const ktune::cli::Command& c : ktune::cli::commands()) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const ktune::cli::UsageError& e) {
      std::fprintf(stderr, "ktune %s: %s\n", c.name, e.message.c_str());
      return 2;
    } catch (const boost::program_options::error& e) {
      std::fprintf(stderr, "ktune %s: %s (see ktune %s --help)\n", c.name, e.what(), c.name);
      return 2;
    } catch (const ktune::InvalidArgument& e) {
      std::fprintf(stderr, "ktune %s: %s\n", c.name, e.what());
      return 2;
    } catch (const ktune::NoDevice& e) {
      std::fprintf(stderr, "ktune %s: no CUDA device found: %s\n", c.name, e.what());
      return 3;
    } catch (const ktune::DatabaseError& e) {
      std::fprintf(stderr, "ktune %s: database error: %s\n", c.name, e.what());
      return 4;
    } catch (const ktune::CompileError& e) {
      std::fprintf(stderr, "ktune %s: %s\n%s\n", c.name, e.what(), e.log().c_str());
      return 5;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ktune %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "ktune: unknown command \"%s\" (commands:", name.c_str());
  for (const ktune::cli::Command& c : ktune::cli::commands()) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, "; see ktune --help)\n");
  return 2;
}
