// The ktune command: a table of subcommands, each parsing its own options.
#pragma once

#include <string>
#include <vector>

namespace ktune::cli {

using Args = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

const std::vector<Command>& commands();

int cmd_devices(const Args& args);
int cmd_ops(const Args& args);
int cmd_space(const Args& args);
int cmd_sweep(const Args& args);
int cmd_best(const Args& args);
int cmd_db(const Args& args);
int cmd_db_merge(const Args& args);  // ktune db merge (cli/db_merge_command.cpp)
int cmd_db_ship(const Args& args);   // ktune db ship (cli/db_ship_command.cpp)
int cmd_db_defaults(const Args& args);  // ktune db defaults (cli/db_defaults_command.cpp)
int cmd_db_diff(const Args& args);   // ktune db diff
int cmd_db_kernels(const Args& args);  // ktune db kernels (cli/db_kernels_command.cpp)
int cmd_replay(const Args& args);

/// Thrown for bad command-line input; main prints it and exits with status 2.
struct UsageError {
  std::string message;
};

}  // namespace ktune::cli
