#include "runtime/core/driver.hpp"

#include <dlfcn.h>

#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <utility>

#include "ktune/error.hpp"

namespace ktune {
namespace {

// What loading the driver produced: a usable table, or why there is none. Computed once.
struct Loaded {
  Driver table{};
  bool names_resolved = false;  // cuGetErrorName/String usable, even when cuInit failed
  std::string error;            // empty when `table` is usable
};

// dlsym returns an object pointer; copying its bytes into the function pointer avoids the
// conditionally-supported cast.
template <typename F>
bool resolve(void* lib, F& slot, std::initializer_list<const char*> names, std::string& missing) {
  static_assert(sizeof(F) == sizeof(void*), "function pointers must be pointer-sized");
  for (const char* name : names) {
    if (void* p = dlsym(lib, name)) {
      std::memcpy(&slot, &p, sizeof p);
      return true;
    }
  }
  if (!missing.empty()) missing += ", ";
  missing += *names.begin();
  return false;
}

// Names of the codes that matter most, for messages when the driver's own table is missing
// (cu_check called without a loaded driver, e.g. in tests).
const char* fallback_error_name(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_ECC_UNCORRECTABLE: return "CUDA_ERROR_ECC_UNCORRECTABLE";
    case CUDA_ERROR_NVLINK_UNCORRECTABLE: return "CUDA_ERROR_NVLINK_UNCORRECTABLE";
    case CUDA_ERROR_CONTAINED: return "CUDA_ERROR_CONTAINED";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_TIMEOUT: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case CUDA_ERROR_ASSERT: return "CUDA_ERROR_ASSERT";
    case CUDA_ERROR_HARDWARE_STACK_ERROR: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
    case CUDA_ERROR_MISALIGNED_ADDRESS: return "CUDA_ERROR_MISALIGNED_ADDRESS";
    case CUDA_ERROR_INVALID_ADDRESS_SPACE: return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
    case CUDA_ERROR_INVALID_PC: return "CUDA_ERROR_INVALID_PC";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_TENSOR_MEMORY_LEAK: return "CUDA_ERROR_TENSOR_MEMORY_LEAK";
    case CUDA_ERROR_EXTERNAL_DEVICE: return "CUDA_ERROR_EXTERNAL_DEVICE";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

// Errors the driver documents as leaving the process in an inconsistent state: every later call
// on the context returns the same error, and only a new process recovers.
bool poisons_context(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

std::string describe(const Loaded* l, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (l != nullptr && l->names_resolved) {
    if (l->table.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (l->table.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  }
  if (name == nullptr) name = fallback_error_name(r);
  std::string s = name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text != nullptr) s += std::string(" (") + text + ")";
  return s;
}

Loaded load_driver() {
  Loaded l;
  // The handle is never closed: function pointers into it live until the process exits.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    l.error = std::string("no CUDA driver: libcuda.so.1 could not be loaded (") +
              (why != nullptr ? why : "unknown reason") + ")";
    return l;
  }
  Driver& d = l.table;
  std::string missing;
  resolve(lib, d.cuGetErrorName, {"cuGetErrorName"}, missing);
  resolve(lib, d.cuGetErrorString, {"cuGetErrorString"}, missing);
  l.names_resolved = missing.empty();
  resolve(lib, d.cuInit, {"cuInit"}, missing);
  resolve(lib, d.cuDriverGetVersion, {"cuDriverGetVersion"}, missing);
  resolve(lib, d.cuDeviceGetCount, {"cuDeviceGetCount"}, missing);
  resolve(lib, d.cuDeviceGet, {"cuDeviceGet"}, missing);
  resolve(lib, d.cuDeviceGetName, {"cuDeviceGetName"}, missing);
  resolve(lib, d.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing);
  resolve(lib, d.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing);
  resolve(lib, d.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing);
  resolve(lib, d.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2"}, missing);
  resolve(lib, d.cuCtxGetCurrent, {"cuCtxGetCurrent"}, missing);
  resolve(lib, d.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing);
  resolve(lib, d.cuCtxGetDevice, {"cuCtxGetDevice"}, missing);
  resolve(lib, d.cuStreamGetCtx, {"cuStreamGetCtx"}, missing);
  resolve(lib, d.cuCtxSynchronize, {"cuCtxSynchronize"}, missing);
  resolve(lib, d.cuModuleLoadData, {"cuModuleLoadData"}, missing);
  resolve(lib, d.cuModuleUnload, {"cuModuleUnload"}, missing);
  resolve(lib, d.cuModuleGetFunction, {"cuModuleGetFunction"}, missing);
  resolve(lib, d.cuFuncGetAttribute, {"cuFuncGetAttribute"}, missing);
  resolve(lib, d.cuFuncSetAttribute, {"cuFuncSetAttribute"}, missing);
  resolve(lib, d.cuLaunchKernel, {"cuLaunchKernel"}, missing);
  {
    // An older driver launches without the attribute (launcher.cpp) and encodes no tensor
    // maps (tensor_map.cpp throws).
    std::string optional;
    resolve(lib, d.cuLaunchKernelEx, {"cuLaunchKernelEx"}, optional);
    resolve(lib, d.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, optional);
    resolve(lib, d.cuMemHostAlloc, {"cuMemHostAlloc"}, optional);
    resolve(lib, d.cuMemFreeHost, {"cuMemFreeHost"}, optional);
    resolve(lib, d.cuMemHostGetDevicePointer, {"cuMemHostGetDevicePointer_v2"}, optional);
  }
  resolve(lib, d.cuMemAlloc, {"cuMemAlloc_v2"}, missing);
  resolve(lib, d.cuMemFree, {"cuMemFree_v2"}, missing);
  resolve(lib, d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"}, missing);
  resolve(lib, d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"}, missing);
  resolve(lib, d.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing);
  resolve(lib, d.cuMemsetD8Async, {"cuMemsetD8Async"}, missing);
  resolve(lib, d.cuMemsetD16Async, {"cuMemsetD16Async"}, missing);
  resolve(lib, d.cuMemsetD32Async, {"cuMemsetD32Async"}, missing);
  resolve(lib, d.cuStreamCreate, {"cuStreamCreate"}, missing);
  resolve(lib, d.cuStreamDestroy, {"cuStreamDestroy_v2"}, missing);
  resolve(lib, d.cuStreamSynchronize, {"cuStreamSynchronize"}, missing);
  resolve(lib, d.cuThreadExchangeStreamCaptureMode, {"cuThreadExchangeStreamCaptureMode"},
          missing);
  resolve(lib, d.cuEventCreate, {"cuEventCreate"}, missing);
  resolve(lib, d.cuEventDestroy, {"cuEventDestroy_v2"}, missing);
  resolve(lib, d.cuEventRecord, {"cuEventRecord"}, missing);
  resolve(lib, d.cuEventSynchronize, {"cuEventSynchronize"}, missing);
  // cuEventElapsedTime_v2 appeared in CUDA 12.8; older drivers only have the original.
  resolve(lib, d.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing);
  if (!missing.empty()) {
    l.error = "unusable CUDA driver: libcuda.so.1 lacks " + missing +
              " (the driver is older than ktune supports)";
    return l;
  }
  const CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) l.error = "no CUDA device: cuInit(0) failed: " + describe(&l, r);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load_driver();
  return l;
}

// The table for cleanup paths: null instead of throwing when there is no driver.
const Driver* driver_or_null() noexcept {
  try {
    const Loaded& l = loaded();
    return l.error.empty() ? &l.table : nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

const Driver& Driver::get() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw NoDevice(l.error);
  return l.table;
}

bool Driver::available(std::string* why_not) {
  try {
    const Loaded& l = loaded();
    if (l.error.empty()) return true;
    if (why_not != nullptr) *why_not = l.error;
  } catch (const std::exception& e) {
    if (why_not != nullptr) *why_not = e.what();
  }
  return false;
}

void cu_check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const Loaded* l = nullptr;
  try {
    l = &loaded();
  } catch (...) {
  }
  const bool sticky = poisons_context(r);
  std::string message =
      std::string(what != nullptr ? what : "a CUDA driver call") + " failed: " + describe(l, r);
  if (sticky) message += "; the CUDA context is unusable";
  throw CudaError(message, static_cast<int>(r), sticky);
}

CUdevice ensure_context(int ordinal) {
  const Driver& d = Driver::get();
  CUcontext current = nullptr;
  KTUNE_CU(d.cuCtxGetCurrent(&current));
  CUdevice dev = 0;
  if (current != nullptr) {
    KTUNE_CU(d.cuCtxGetDevice(&dev));
    return dev;
  }
  int count = 0;
  KTUNE_CU(d.cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    throw NoDevice("no CUDA device " + std::to_string(ordinal) + ": this machine has " +
                   std::to_string(count) + " (valid ordinals are 0 to " +
                   std::to_string(count - 1) + ")");
  }
  KTUNE_CU(d.cuDeviceGet(&dev, ordinal));
  // Primary contexts are retained once per device and deliberately never released: releasing
  // them at static destruction would race with other libraries' teardown, and the driver
  // reclaims everything at process exit.
  static std::mutex mutex;
  static auto* const retained = new std::map<int, CUcontext>();
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = retained->find(ordinal);
    if (it == retained->end()) {
      KTUNE_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
      it = retained->emplace(ordinal, ctx).first;
    }
    ctx = it->second;
  }
  KTUNE_CU(d.cuCtxSetCurrent(ctx));
  return dev;
}

StreamContext::StreamContext(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return;
  const Driver& d = Driver::get();
  CUcontext own = nullptr;
  KTUNE_CU(d.cuStreamGetCtx(stream, &own));
  KTUNE_CU(d.cuCtxGetCurrent(&previous_));
  if (own == previous_) return;
  KTUNE_CU(d.cuCtxSetCurrent(own));
  switched_ = true;
}

StreamContext::~StreamContext() {
  if (switched_) Driver::get().cuCtxSetCurrent(previous_);
}

Module::Module(const std::string& cubin) {
  if (cubin.empty()) throw InvalidArgument("Module: empty CUBIN image");
  const Driver& d = Driver::get();
  KTUNE_CU(d.cuModuleLoadData(&module_, cubin.data()));
}

Module::~Module() {
  if (module_ == nullptr) return;
  if (const Driver* d = driver_or_null()) d->cuModuleUnload(module_);
}

Module::Module(Module&& o) noexcept : module_(std::exchange(o.module_, nullptr)) {}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    Module old(std::move(*this));
    module_ = std::exchange(o.module_, nullptr);
  }
  return *this;
}

CUfunction Module::function(const std::string& lowered_name) const {
  if (module_ == nullptr) {
    throw InvalidArgument("Module::function(" + lowered_name + "): no module is loaded");
  }
  const Driver& d = Driver::get();
  CUfunction f = nullptr;
  const std::string what = "cuModuleGetFunction(" + lowered_name + ")";
  cu_check(d.cuModuleGetFunction(&f, module_, lowered_name.c_str()), what.c_str());
  return f;
}

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;  // the driver refuses empty allocations; an empty buffer holds nothing
  const Driver& d = Driver::get();
  KTUNE_CU(d.cuMemAlloc(&ptr_, bytes));
  bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ == 0) return;
  if (const Driver* d = driver_or_null()) d->cuMemFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace ktune
