// Error types thrown by every ktune library. Only executables turn them into exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace ktune {

/// Base of every error ktune throws. The message names the bad value and what is allowed.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Bad input from a caller: unknown op, malformed shape, unsupported dtype, null pointer...
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// No CUDA driver or no CUDA device on this machine.
class NoDevice : public Error {
 public:
  using Error::Error;
};

/// A CUDA driver call failed. `code` is the CUresult; `sticky` is true when the context is unusable.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code, bool sticky)
      : Error(message), code_(code), sticky_(sticky) {}
  int code() const noexcept { return code_; }
  bool sticky() const noexcept { return sticky_; }

 private:
  int code_;
  bool sticky_;
};

/// NVRTC failed to compile a kernel; `log()` holds the compiler output.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string log) : Error(message), log_(std::move(log)) {}
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

/// A compile ran past its time limit and was stopped (the tuner compiles in a child process).
class CompileTimeout : public CompileError {
 public:
  using CompileError::CompileError;
};

/// A database could not be opened, read or written.
class DatabaseError : public Error {
 public:
  using Error::Error;
};

}  // namespace ktune
