/* A stand-in libcuda.so.1 for CPU tests that need tensor maps encoded (the wgmma kernels' launch
 * arguments) on a machine without a GPU: every entry point runtime/core/driver.cpp resolves,
 * cuInit succeeding with no device (cuDeviceGetCount: 0), and cuTensorMapEncodeTiled filling the
 * map with a checksum of its arguments. Anything that needs a device fails with
 * CUDA_ERROR_NO_DEVICE. Loaded only where a test's environment puts its directory first on
 * LD_LIBRARY_PATH (tests/CMakeLists.txt); never installed. */
#include <cuda.h>
#include <string.h>

#define NO_DEVICE return CUDA_ERROR_NO_DEVICE

CUresult CUDAAPI cuGetErrorName(CUresult r, const char** s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_NO_DEVICE (stub driver)";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult r, const char** s) {
  *s = r == CUDA_SUCCESS ? "no error" : "the test stub driver has no device";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int* n) { *n = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int o) { (void)d; (void)o; NO_DEVICE; }
CUresult CUDAAPI cuDeviceGetName(char* n, int l, CUdevice d) { (void)n; (void)l; (void)d; NO_DEVICE; }
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  (void)v; (void)a; (void)d; NO_DEVICE;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* b, CUdevice d) { (void)b; (void)d; NO_DEVICE; }
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { (void)c; (void)d; NO_DEVICE; }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; NO_DEVICE; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* c) { *c = NULL; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { (void)c; NO_DEVICE; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice* d) { (void)d; NO_DEVICE; }
CUresult CUDAAPI cuStreamGetCtx(CUstream s, CUcontext* c) { (void)s; (void)c; NO_DEVICE; }
CUresult CUDAAPI cuCtxSynchronize(void) { NO_DEVICE; }
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void* i) { (void)m; (void)i; NO_DEVICE; }
CUresult CUDAAPI cuModuleUnload(CUmodule m) { (void)m; NO_DEVICE; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, const char* n) {
  (void)f; (void)m; (void)n; NO_DEVICE;
}
CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  (void)v; (void)a; (void)f; NO_DEVICE;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f; (void)a; (void)v; NO_DEVICE;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream s, void** p,
                                void** e) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)s;
  (void)p; (void)e; NO_DEVICE;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  (void)c; (void)f; (void)p; (void)e; NO_DEVICE;
}
/* A checksum of every argument, so that equal specs give equal maps and different ones differ. */
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dtype,
                                        cuuint32_t rank, void* address,
                                        const cuuint64_t* dims, const cuuint64_t* strides,
                                        const cuuint32_t* box, const cuuint32_t* element_strides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle,
                                        CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  unsigned long long h = 1469598103934665603ull;
  unsigned long long words[4 * 5 + 8];
  unsigned n = 0, i;
  words[n++] = (unsigned long long)dtype;
  words[n++] = rank;
  words[n++] = (unsigned long long)address;
  for (i = 0; i < rank; ++i) {
    words[n++] = dims[i];
    words[n++] = i + 1 < rank ? strides[i] : 0;
    words[n++] = box[i];
    words[n++] = element_strides[i];
  }
  words[n++] = (unsigned long long)interleave;
  words[n++] = (unsigned long long)swizzle;
  words[n++] = (unsigned long long)l2;
  words[n++] = (unsigned long long)oob;
  memset(map, 0, sizeof *map);
  for (i = 0; i < n; ++i) {
    h = (h ^ words[i]) * 1099511628211ull;
    memcpy((char*)map + (i % 16) * 8, &h, 8);
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostAlloc(void** p, size_t b, unsigned int f) { (void)p; (void)b; (void)f; NO_DEVICE; }
CUresult CUDAAPI cuMemFreeHost(void* p) { (void)p; NO_DEVICE; }
CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int f) {
  (void)d; (void)p; (void)f; NO_DEVICE;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t b) { (void)p; (void)b; NO_DEVICE; }
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { (void)p; NO_DEVICE; }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t b) { (void)d; (void)s; (void)b; NO_DEVICE; }
CUresult CUDAAPI cuMemcpyDtoH(void* d, CUdeviceptr s, size_t b) { (void)d; (void)s; (void)b; NO_DEVICE; }
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t b, CUstream st) {
  (void)d; (void)s; (void)b; (void)st; NO_DEVICE;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  (void)d; (void)v; (void)n; (void)s; NO_DEVICE;
}
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  (void)d; (void)v; (void)n; (void)s; NO_DEVICE;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  (void)d; (void)v; (void)n; (void)s; NO_DEVICE;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int f) { (void)s; (void)f; NO_DEVICE; }
CUresult CUDAAPI cuStreamDestroy(CUstream s) { (void)s; NO_DEVICE; }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { (void)s; NO_DEVICE; }
CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* m) { (void)m; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int f) { (void)e; (void)f; NO_DEVICE; }
CUresult CUDAAPI cuEventDestroy(CUevent e) { (void)e; NO_DEVICE; }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; NO_DEVICE; }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { (void)e; NO_DEVICE; }
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) { (void)ms; (void)a; (void)b; NO_DEVICE; }
