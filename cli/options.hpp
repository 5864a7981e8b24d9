// Option parsing shared by the subcommands.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "db/store.hpp"
#include "templates/op.hpp"

namespace ktune::cli {

/// Adds --help, parses `args` into `vm`. Returns false (after printing help) for --help.
/// Options are never guessed from a prefix (--d is not --db), and an argument that is no option's
/// value is an error naming it (a bare shape suggests --shape).
bool parse_options(const std::string& command, const std::string& synopsis,
                   boost::program_options::options_description& desc, const Args& args,
                   boost::program_options::variables_map& vm,
                   boost::program_options::positional_options_description* positional = nullptr);

/// The one check of numeric options, declared as strings: --`name`'s text as a finite number in
/// [min, max]. Throws InvalidArgument in one style for every option:
///   --timeout "nan" is not allowed: expected a number from 0.1 to 3600
double number_option(const boost::program_options::variables_map& vm, const std::string& name,
                     double min, double max);
/// The same for an integer option ("expected an integer from 0 to 1024").
long long integer_option(const boost::program_options::variables_map& vm, const std::string& name,
                         long long min, long long max);

/// A comma-separated list of integers, each in [min, max] ("1,16,128"); the message names the
/// list and the bad item.
std::vector<long long> integer_list_option(const boost::program_options::variables_map& vm,
                                           const std::string& name, long long min, long long max);
/// Looks an op up by name; throws InvalidArgument naming the (quoted) value and the known ops.
const Op& op_option(const std::string& text);
/// Parses a dtype name; throws InvalidArgument naming the allowed ones.
DType dtype_option(const std::string& text);
/// The built-in device of an --arch value; throws InvalidArgument naming the allowed ones.
DeviceInfo arch_option(const std::string& text);
/// Throws InvalidArgument when `op` does not support `t`.
void check_dtype(const Op& op, DType t);
/// `shape` with causal=yes added for --causal (the op's default problem when shape is empty);
/// throws InvalidArgument when the op has no causal dimension.
std::string with_causal(const Op& op, const std::string& shape, bool causal);

/// --db, else the default user database, with where its path came from. `KTUNE_DB=` (empty) is
/// unset; `--db ""` is an InvalidArgument.
DbLocation db_option(const boost::program_options::variables_map& vm);
/// Whether the database file exists. Throws DatabaseError naming the path and where it came from
/// when the path cannot be examined (too long, in a directory that cannot be searched).
bool db_exists(const DbLocation& db);

}  // namespace ktune::cli
