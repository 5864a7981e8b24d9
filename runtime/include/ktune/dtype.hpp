// Element types and activations of ktune's public API.
#pragma once

namespace ktune {

/// Element type of a tensor. Values match the C API's ktune_dtype; i32 (index tensors such as
/// MoE expert ids) is not a compute type: no op runs in it and parse_dtype() does not accept it.
/// e4m3: OCP FP8 E4M3 (torch.float8_e4m3fn), inputs only: ops that take it write bf16
/// (flash_attention on sm_90a).
enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, e4m3 = 4 };

/// Activation of bias_act. Values match the C API's ktune_activation.
enum class Activation : int { gelu_tanh = 0, gelu_erf = 1, silu = 2, relu = 3 };

}  // namespace ktune
