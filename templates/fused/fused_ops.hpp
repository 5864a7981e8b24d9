// The fused memory-bound ops: add_rmsnorm, layernorm, bias_act, swiglu, softmax.
#pragma once

#include <vector>

#include "templates/op.hpp"

namespace ktune {

/// The fused ops in a fixed order; the pointers stay valid for the life of the program.
std::vector<const Op*> fused_ops();

}  // namespace ktune
