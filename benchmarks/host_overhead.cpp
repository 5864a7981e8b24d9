// Host cost of one ktune_add_rmsnorm call on a planned problem: what the runtime adds per call
// on top of the kernel launch. Loads the ktune library given on the command line (so two builds
// can be compared by alternating processes) and the CUDA driver with dlopen.
//
//   host_overhead LIBKTUNE.so [m n [batches [calls_per_batch]]]
//
// Each batch times `calls_per_batch` back-to-back calls with a steady clock, then synchronises
// the stream outside the timed region (the launch queue never fills). Prints the median, p10 and
// p90 of the per-call time over the batches, in ns. benchmarks/run_host_overhead.sh compares two
// builds by running them alternately on the same GPU.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t);
  CUresult (*cuMemsetD16)(CUdeviceptr, unsigned short, std::size_t);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
};

template <class F>
void load(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) {
    std::fprintf(stderr, "missing symbol %s\n", name);
    std::exit(2);
  }
}

void check(CUresult r, const char* what) {
  if (r != 0) {
    std::fprintf(stderr, "%s failed: CUresult %d\n", what, r);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: host_overhead LIBKTUNE.so [m n [batches [calls]]]\n");
    return 2;
  }
  const long long m = argc > 3 ? std::atoll(argv[2]) : 1;
  const long long n = argc > 3 ? std::atoll(argv[3]) : 4096;
  const int batches = argc > 4 ? std::atoi(argv[4]) : 400;
  const int calls = argc > 5 ? std::atoi(argv[5]) : 200;

  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    std::fprintf(stderr, "no CUDA driver: %s\n", dlerror());
    return 1;
  }
  Driver d{};
  load(cuda, "cuInit", d.cuInit);
  load(cuda, "cuDeviceGet", d.cuDeviceGet);
  load(cuda, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain);
  load(cuda, "cuCtxSetCurrent", d.cuCtxSetCurrent);
  load(cuda, "cuMemAlloc_v2", d.cuMemAlloc);
  load(cuda, "cuMemsetD16_v2", d.cuMemsetD16);
  load(cuda, "cuStreamCreate", d.cuStreamCreate);
  load(cuda, "cuStreamSynchronize", d.cuStreamSynchronize);

  void* kt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (kt == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  using AddRmsnorm = int (*)(const void*, const void*, const void*, void*, void*, std::int64_t,
                             std::int64_t, int, float, void*);
  AddRmsnorm add_rmsnorm = nullptr;
  const char* (*last_error)() = nullptr;
  load(kt, "ktune_add_rmsnorm", add_rmsnorm);
  load(kt, "ktune_last_error", last_error);

  check(d.cuInit(0), "cuInit");
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  check(d.cuStreamCreate(&stream, 1 /* non-blocking */), "cuStreamCreate");

  const std::size_t elems = static_cast<std::size_t>(m * n);
  CUdeviceptr x, r, w, y, h;
  for (CUdeviceptr* p : {&x, &r, &w, &y, &h}) {
    check(d.cuMemAlloc(p, elems * 2), "cuMemAlloc");
    check(d.cuMemsetD16(*p, 0x3f80, elems), "cuMemsetD16");  // bf16 1.0, never zeros
  }
  const int kBf16 = 2;
  auto call = [&] {
    const int rc = add_rmsnorm(reinterpret_cast<void*>(x), reinterpret_cast<void*>(r),
                               reinterpret_cast<void*>(w), reinterpret_cast<void*>(y),
                               reinterpret_cast<void*>(h), m, n, kBf16, 1e-6f, stream);
    if (rc != 0) {
      std::fprintf(stderr, "ktune_add_rmsnorm: %d: %s\n", rc, last_error());
      std::exit(1);
    }
  };
  // Plan (lookup, compile or cache load) and warm up outside the measurement.
  for (int i = 0; i < 1000; ++i) call();
  check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");

  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  const auto at = [&](double q) { return per_call[static_cast<std::size_t>(q * (per_call.size() - 1))]; };
  std::printf("%s m=%lld n=%lld: median %.0f ns/call (p10 %.0f, p90 %.0f) over %d batches of %d\n",
              argv[1], m, n, at(0.5), at(0.1), at(0.9), batches, calls);
  return 0;
}
