// AttentionArgs checked on the host, routed to the prefill (flash_attention) or decode
// (flash_decode) op, and packed in that op's declared order (Runtime::attention).
#pragma once

#include <array>
#include <cstdint>

#include "ktune/ktune.hpp"
#include "runtime/dispatch/planner.hpp"

namespace ktune {

/// One attention call in its op's order, as Runtime::Impl::run takes it.
struct AttentionCall {
  const char* op = nullptr;  // "flash_attention" or "flash_decode"
  int op_index = 0;
  std::array<std::int64_t, kMaxDims> dims{};
  std::array<std::uint64_t, kMaxTensors> tensors{};
  std::array<double, kMaxScalars> scalars{};
  std::array<std::int64_t, 12> strides{};  // q, k, v, o: batch, head, seq
  int ndims = 0;
  int ntensors = 0;
  int nscalars = 0;
  bool has_strides = false;
  CallerWorkspace workspace;  // given() false: the runtime's
};

/// The op `a` goes to: a.impl, or for automatic the decode op when nq <= kDecodeMaxNq (varlen
/// calls included: nq is the longest sequence; not a paged varlen call) and it has every
/// variant `a` asks for and takes a.dtype (or prefill cannot serve the call either: its dtype
/// check then says why), else the prefill op.
/// Throws InvalidArgument when the forced op cannot serve `a` (a variant the op lacks).
const char* attention_op_for(const AttentionArgs& a);

/// Checks `a` and packs it for attention_op_for(a): dtype, the problem (the op's
/// check_problem), scale and softcap, then with `pointers` each tensor (null where required,
/// set where the call does not use it, misaligned) and the workspace pointer. Throws
/// InvalidArgument naming the argument and what is allowed. No CUDA call; allocates only to
/// throw, and at the first call of each (op, paging, ALiBi) combination of the process.
AttentionCall pack_attention(const AttentionArgs& a, bool pointers = true);

}  // namespace ktune
