// An application of ktune's installed package: find_package(ktune), link ktune::runtime, call the
// C and C++ APIs. Without a GPU the calls fail cleanly with a status or an exception.
#include <ktune/ktune.h>

#include <cstdio>
#include <cstring>
#include <ktune/ktune.hpp>

int main() {
  if (std::strcmp(ktune_version(), "") == 0) return 1;
  ktune_match match;
  char params[128];
  ktune_status s = ktune_query("add_rmsnorm", "m=4,n=8", KTUNE_BF16, &match, params, sizeof params);
  std::printf("ktune %s; query status %d (%s)\n", ktune_version(), static_cast<int>(s),
              s == KTUNE_OK ? params : ktune_last_error());
  if (s != KTUNE_OK && s != KTUNE_ERROR_NO_DEVICE) return 1;
  try {
    ktune::Runtime::global().query("no_such_op", "m=1", ktune::DType::bf16);
    return 1;
  } catch (const ktune::InvalidArgument& e) {
    std::printf("caught across the library boundary: %s\n", e.what());
  }
  return 0;
}
