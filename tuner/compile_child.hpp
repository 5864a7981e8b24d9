// NVRTC compiles with a time limit. NVRTC cannot be cancelled, and fork() without exec in a
// threaded process can deadlock on NVRTC's locks, so each compile runs in a fresh child process
// (`ktune __compile`, spawned and exec'ed) that reads one job and writes back the kernel or the
// error. Past the limit the child is killed and reaped, and CompileTimeout is thrown.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/compiler.hpp"

namespace ktune {

/// This executable with "__compile": the child command of the ktune binary itself.
std::vector<std::string> default_compile_command();

/// Compiles `job` in a child process started from `command` (e.g. {"/usr/bin/ktune",
/// "__compile"}), within `timeout_s` seconds from the start of the child. Returns what
/// Compiler(std::nullopt).compile(job) returns in the child, with `seconds` the wall time seen
/// here. Throws CompileError with the log as the child reports it (also when NVRTC crashed the
/// child), CompileTimeout past the limit (the child is killed and reaped first), InvalidArgument
/// for a malformed job, and Error when the child cannot start or breaks the protocol.
CompiledKernel compile_in_child(const std::vector<std::string>& command, const CompileJob& job,
                                double timeout_s);

/// A Compiler::Builder that compiles through compile_in_child.
Compiler::Builder child_builder(std::vector<std::string> command, double timeout_s);

/// The child's side: reads one job on `in_fd`, compiles it in this process, writes the kernel or
/// the error on `out_fd`. Returns the process exit code (0 when a reply was written).
int compile_child_main(int in_fd, int out_fd);

}  // namespace ktune
