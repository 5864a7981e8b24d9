// MoeArgs checked on the host and packed in the moe op's declared order (Runtime::moe).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ktune/ktune.hpp"
#include "runtime/dispatch/planner.hpp"

namespace ktune {

/// Alignment of every moe tensor pointer: what moe_op().alignment() returns for any
/// configuration (tested), so it can be checked before the lookup picks one.
constexpr std::size_t kMoeAlignment = 16;

/// One moe call in the op's order, as Runtime::Impl::run takes it.
struct MoeCall {
  std::array<std::int64_t, kMaxDims> dims{};
  std::array<std::uint64_t, kMaxTensors> tensors{};
  std::array<double, kMaxScalars> scalars{};
  int ndims = 0;
  int ntensors = 0;
  int nscalars = 0;
  CallerWorkspace workspace;  // given() false: the runtime's
};

/// Checks `a` and packs it: dtype, routing, the problem (the op's check_problem), the scalars,
/// then with `pointers` each tensor (null where the routing mode needs it, set where the mode
/// ignores it, misaligned) and the workspace's pointer (its size needs the configuration: the
/// planner checks it). Throws InvalidArgument naming the argument and what is allowed. No CUDA
/// call; allocates only to throw.
MoeCall pack_moe(const MoeArgs& a, bool pointers = true);

/// What a routing mode does with each tensor of the op, in the op's order.
struct MoeTensorUse {
  std::string name;
  bool required = false;  // must be set
  bool used = false;      // read or written; a pointer set for an unused tensor is an error
};

/// The table pack_moe() checks pointers against for `dtype`, per routing mode (the op's
/// choices, in order), read once from op.tensors(): which tensors a call needs or ignores
/// depends on its mode and dtype alone (e4m3 adds the weights' scales).
const std::vector<std::vector<MoeTensorUse>>& moe_tensor_uses(DType dtype);

}  // namespace ktune
