// Option parsing shared by the subcommands.
#pragma once

#include <filesystem>
#include <string>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "templates/op.hpp"

namespace ktune::cli {

/// Adds --help, parses `args` into `vm`. Returns false (after printing help) for --help.
bool parse_options(const std::string& command, const std::string& synopsis,
                   boost::program_options::options_description& desc, const Args& args,
                   boost::program_options::variables_map& vm,
                   boost::program_options::positional_options_description* positional = nullptr);

/// Parses a dtype name; throws InvalidArgument naming the allowed ones.
DType dtype_option(const std::string& text);
/// Throws InvalidArgument when `op` does not support `t`.
void check_dtype(const Op& op, DType t);
/// `shape` with causal=yes added for --causal (the op's default problem when shape is empty);
/// throws InvalidArgument when the op has no causal dimension.
std::string with_causal(const Op& op, const std::string& shape, bool causal);
/// --db, else the default user database path.
std::filesystem::path db_option(const boost::program_options::variables_map& vm);

}  // namespace ktune::cli
