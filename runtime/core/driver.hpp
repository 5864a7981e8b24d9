// The CUDA driver, loaded at run time with dlopen("libcuda.so.1"): binaries start and every
// CPU-only command works on a machine without a GPU or driver.
#pragma once

#include <cuda.h>

#include <string>

namespace ktune {

/// Function table of the driver entry points ktune uses. Obtain with Driver::get().
struct Driver {
  // Throws NoDevice with a clear message when libcuda.so.1 cannot be loaded or cuInit fails.
  static const Driver& get();
  // True when get() would succeed; never throws.
  static bool available(std::string* why_not = nullptr);

  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);                    // _v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);                    // _v2
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
  // Optional (null when the driver lacks it): launches with attributes (programmatic dependent
  // launch).
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  // Optional (null when the driver lacks it, before CUDA 12.0): encodes a TMA descriptor
  // (tensor_map.cpp, which says so in its error).
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  // Optional (null when the driver lacks them): mapped pinned host memory, for the tuner's
  // queue hold (tuner/queue_hold.cpp); without them it times as before.
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned int);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned int);  // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);                        // _v2
  CUresult (*cuMemFree)(CUdeviceptr);                                  // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);          // _v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);                // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);  // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);                               // _v2
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode*);
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);                                 // _v2
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);            // _v2 where present
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

/// Throws CudaError naming `what` and the driver's error name and string. Errors after which the
/// context is unusable (illegal address, launch failure, misaligned address, trap...) are marked
/// sticky.
void cu_check(CUresult r, const char* what);

#define KTUNE_CU(call) ::ktune::cu_check((call), #call)

/// Makes a context current on this thread: keeps the caller's current context if there is one,
/// otherwise retains the primary context of `ordinal`. Returns the device of that context.
CUdevice ensure_context(int ordinal = 0);

/// For one call: makes `stream`'s context current when it differs from the thread's (a stream of
/// another GPU than the caller's current one, as torch passes for a tensor on a non-current
/// device), and restores the caller's at scope exit. The special handles (0, legacy, per-thread)
/// belong to whatever context is current and change nothing.
class StreamContext {
 public:
  explicit StreamContext(CUstream stream);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

/// A loaded module (RAII). Loading needs a current context.
class Module {
 public:
  Module() = default;
  explicit Module(const std::string& cubin);
  ~Module();
  Module(Module&& o) noexcept;
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  /// Throws CudaError when the module has no such function.
  CUfunction function(const std::string& lowered_name) const;

 private:
  CUmodule module_ = nullptr;
};

/// Device memory (RAII).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace ktune
