// Programmatic dependent launch (compute capability 9.0 and later): a kernel launched with
// KernelLaunch::programmatic may be scheduled before the previous kernel on its stream finishes;
// it calls griddep_wait() before reading anything that kernel wrote (the wait returns once the
// previous grid has completed and its writes are visible, PTX griddepcontrol.wait). The previous
// kernel may call griddep_launch_dependents() once its CTAs no longer need the SM slots the
// dependent grid would take: the dependent is then scheduled when every CTA has called it or
// exited, and its prologue (up to the wait) overlaps the previous grid's tail. Both are no-ops
// before sm_90 and when the kernel was launched without the attribute.
#pragma once

namespace ktune {

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace ktune
