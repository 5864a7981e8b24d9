#include "tuner/queue_hold.hpp"

#include <atomic>
#include <string>

#include "ktune/error.hpp"

namespace ktune {
namespace {

// Waits until flag[0] == want (a system-scope load of mapped host memory each turn) or until
// limit_ns have passed on the global timer; a timeout writes want to flag[1]. PTX, so that the
// worker needs no run-time compiler: the driver compiles it for the GPU at load.
constexpr const char* kHoldPtx = R"(.version 7.0
.target sm_80
.address_size 64

.visible .entry ktune_queue_hold(
    .param .u64 flag,
    .param .u32 want,
    .param .u64 limit_ns)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [flag];
    ld.param.u32 %r1, [want];
    ld.param.u64 %rd2, [limit_ns];
    mov.u64 %rd3, %globaltimer;
$L_wait:
    ld.relaxed.sys.global.u32 %r2, [%rd1];
    setp.eq.u32 %p1, %r2, %r1;
    @%p1 bra $L_done;
    mov.u64 %rd4, %globaltimer;
    sub.u64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p2, %rd5, %rd2;
    @%p2 bra $L_wait;
    st.relaxed.sys.global.u32 [%rd1+4], %r1;
$L_done:
    ret;
}
)";

}  // namespace

QueueHold::QueueHold() {
  const Driver& cu = Driver::get();
  if (!cu.cuMemHostAlloc || !cu.cuMemFreeHost || !cu.cuMemHostGetDevicePointer)
    throw Error("queue hold: the CUDA driver has no mapped host memory entry points");
  module_ = Module(kHoldPtx);
  kernel_ = module_.function("ktune_queue_hold");
  void* host = nullptr;
  KTUNE_CU(cu.cuMemHostAlloc(&host, 2 * sizeof(unsigned),
                             CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  host_ = static_cast<volatile unsigned*>(host);
  host_[0] = 0;
  host_[1] = 0;
  try {
    KTUNE_CU(cu.cuMemHostGetDevicePointer(&device_, host, 0));
  } catch (...) {
    cu.cuMemFreeHost(host);
    throw;
  }
}

QueueHold::~QueueHold() {
  if (host_ == nullptr) return;
  try {
    Driver::get().cuMemFreeHost(const_cast<unsigned*>(host_));
  } catch (...) {
  }
}

void QueueHold::hold(CUstream stream, unsigned long long limit_ns) {
  ++sequence_;
  if (sequence_ == 0) ++sequence_;  // 0 is the flag's initial value: never waited for
  unsigned long long flag = device_;
  unsigned want = sequence_;
  void* params[] = {&flag, &want, &limit_ns};
  KTUNE_CU(Driver::get().cuLaunchKernel(kernel_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

void QueueHold::release() {
  // Everything enqueued before this store is in the stream ahead of the kernel's exit.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  host_[0] = sequence_;
}

bool QueueHold::timed_out() const { return host_[1] == sequence_; }

}  // namespace ktune
