// Small string helpers the ops' host-side tests share: whether a message contains a part, and
// the InvalidArgument message a call throws.
#pragma once

#include <functional>
#include <string>

#include "ktune/error.hpp"

namespace ktune::test {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// The InvalidArgument message `f` throws, or "" when it throws none.
inline std::string run_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace ktune::test
