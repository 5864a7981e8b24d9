// Element types of ktune's public API.
#pragma once

namespace ktune {

/// Element type of a tensor. Values match the C API's ktune_dtype.
enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };

}  // namespace ktune
