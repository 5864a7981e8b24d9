// Development harness for the e4m3 (FP8) path of templates/attention/flash_attention_sm90.cuh:
// checks it against an fp32 reference on the dequantised inputs, then times it (V's transpose
// included) beside the bf16 kernel of the same file on the same shapes.
//
// Build (nvcc 13, here or on the GPU machine):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/attention/fp8_dev.cu -o fp8_dev -lcuda
// Run: ./fp8_dev [check] [time] [profile=I]   (no argument: check and time)
//   profile=I: two launches of configs()[I] on B=1 H=16 N=8192, for ncu.
//
// Reference: the tuner's fp32 kernel (attention/reference.cuh) on the dequantised values.
// Inputs: e4m3 values drawn uniformly from [-4, 4] and rounded, dequantisation scales 0.25 (Q, K)
// and 0.5 (V), softmax scale 1/sqrt(D); the bf16 runs use uniform [-1, 1]. TFLOP/s = 4 B H Nq Nk D
// / t (halved under a causal mask), the same count for both types.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attention/flash_attention_sm90.cuh"
#include "attention/fp8_transpose.cuh"
#include "attention/reference.cuh"
#include "benchmarks/attention/dev_util.cuh"

using namespace ktune;

__global__ void fill_nan_bf16(bf16* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i].bits = 0x7fc0;
}

__global__ void bf16_to_float(const bf16* p, float* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = to_float(p[i]);
}

// ---- tensor maps ----

static tma::TensorMap encode(const void* ptr, CUtensorMapDataType type,
                             std::vector<cuuint64_t> dims, std::vector<cuuint64_t> strides,
                             std::vector<cuuint32_t> box) {
  CUtensorMap m;
  std::vector<cuuint32_t> steps(dims.size(), 1);
  const CUresult r = cuTensorMapEncodeTiled(
      &m, type, static_cast<cuuint32_t>(dims.size()), const_cast<void*>(ptr), dims.data(),
      strides.data(), box.data(), steps.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(r));
    std::exit(2);
  }
  tma::TensorMap t;
  std::memcpy(&t, &m, sizeof t);
  return t;
}

struct Shape {
  int b, hq, hkv, nq, nk, d;
  bool causal;
};

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *vt = nullptr, *o = nullptr;
};

static FlashAttentionArgs base_args(const Shape& s, const Buffers& buf) {
  FlashAttentionArgs a{};
  a.q = buf.q;
  a.k = buf.k;
  a.v = buf.v;
  a.o = buf.o;
  a.q_row_stride = a.o_row_stride = a.k_row_stride = a.v_row_stride = s.d;
  a.q_head_stride = a.o_head_stride = static_cast<long long>(s.nq) * s.d;
  a.q_batch_stride = a.o_batch_stride = a.q_head_stride * s.hq;
  a.k_head_stride = a.v_head_stride = static_cast<long long>(s.nk) * s.d;
  a.k_batch_stride = a.v_batch_stride = a.k_head_stride * s.hkv;
  a.batch = s.b;
  a.heads_q = s.hq;
  a.heads_kv = s.hkv;
  a.seq_q = s.nq;
  a.seq_k = s.nk;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  return a;
}

// A kernel configuration: one instantiation, plus how to launch it.
struct Config {
  std::string name;
  bool fp8;
  int d, bn, consumers, stages;
  bool causal, persistent;
  const void* fn;
};

template <typename T, int D, int BN, int C, int S, bool PP, bool CAUSAL, bool PERS>
Config make(const char* name) {
  return {name, sizeof(T) == 1, D, BN, C, S, CAUSAL, PERS,
          reinterpret_cast<const void*>(
              &flash_attention_sm90<T, D, BN, C, S, PP, CAUSAL, false, false, false, PERS>)};
}

static std::vector<Config> configs() {
  return {
      make<e4m3, 128, 128, 2, 3, true, false, false>("fp8 128x128 s3 pp"),
      make<e4m3, 128, 128, 2, 4, true, false, false>("fp8 128x128 s4 pp"),
      make<e4m3, 128, 128, 2, 5, true, false, false>("fp8 128x128 s5 pp"),
      make<e4m3, 128, 128, 2, 6, true, false, false>("fp8 128x128 s6 pp"),
      make<e4m3, 128, 128, 2, 4, true, false, true>("fp8 128x128 s4 pp pers"),
      make<e4m3, 128, 128, 2, 4, false, false, false>("fp8 128x128 s4"),
      make<e4m3, 128, 128, 3, 3, true, false, false>("fp8 192x128 s3 pp"),
      make<e4m3, 128, 128, 3, 4, true, false, false>("fp8 192x128 s4 pp"),
      make<e4m3, 128, 128, 3, 4, false, false, false>("fp8 192x128 s4"),
      make<e4m3, 128, 128, 2, 3, true, true, true>("fp8 128x128 s3 pp pers"),
      make<e4m3, 128, 128, 2, 4, true, true, true>("fp8 128x128 s4 pp pers"),
      make<e4m3, 128, 128, 2, 5, true, true, true>("fp8 128x128 s5 pp pers"),
      make<e4m3, 256, 128, 2, 2, true, false, false>("fp8 d256 128x128 s2 pp"),
      make<e4m3, 256, 128, 2, 2, true, true, false>("fp8 d256 128x128 s2 pp"),
      make<bf16, 128, 128, 2, 2, true, false, false>("bf16 128x128 s2 pp"),
      make<bf16, 128, 128, 2, 3, true, false, false>("bf16 128x128 s3 pp"),
      make<bf16, 128, 128, 2, 3, true, false, true>("bf16 128x128 s3 pp pers"),
      make<bf16, 128, 64, 3, 3, false, true, false>("bf16 192x64 s3"),
      make<bf16, 128, 128, 2, 3, true, true, false>("bf16 128x128 s3 pp"),
      make<bf16, 128, 128, 2, 3, true, true, true>("bf16 128x128 s3 pp pers"),
  };
}

// V -> Vt (fp8_transpose.cuh) on `st`.
static void launch_transpose(const Shape& s, const Buffers& buf, cudaStream_t st) {
  const long long kp = fp8_vt_keys(s.nk);
  Fp8VTransposeArgs t{};
  t.v = buf.v;
  t.vt = buf.vt;
  t.v_row_stride = s.d;
  t.v_head_stride = static_cast<long long>(s.nk) * s.d;
  t.v_batch_stride = t.v_head_stride * s.hkv;
  t.batch = s.b;
  t.heads_kv = s.hkv;
  t.seq_k = s.nk;
  t.nk_pad = static_cast<int>(kp);
  const dim3 tg(static_cast<unsigned>(kp / kFp8TransposeKeys), s.hkv, s.b);
  if (s.d == 128)
    fp8_v_transpose<128><<<tg, kFp8TransposeThreads, 0, st>>>(t);
  else
    fp8_v_transpose<256><<<tg, kFp8TransposeThreads, 0, st>>>(t);
  CK(cudaGetLastError());
}

// Launches V's transpose (fp8) and the kernel on `st`.
static void launch(const Config& c, const Shape& s, const Buffers& buf, float o_scale,
                   float qk_descale, int sms, cudaStream_t st) {
  const int bn = c.bn;
  FlashAttentionSm90Args a{};
  a.base = base_args(s, buf);
  a.base.scale *= qk_descale;
  a.base.o_scale = o_scale;
  const unsigned smem = flash_attention_sm90_smem_bytes(s.d, bn, c.consumers, c.stages,
                                                        c.fp8 ? 1 : 2);
  const int esz = c.fp8 ? 1 : 2;
  const CUtensorMapDataType type =
      c.fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t D = s.d;
  const cuuint32_t cols = 128 / esz;
  a.q_map = encode(buf.q, type, {D, (cuuint64_t)s.nq, (cuuint64_t)s.hq, (cuuint64_t)s.b},
                   {D * esz, D * esz * s.nq, D * esz * s.nq * s.hq}, {cols, 64, 1, 1});
  a.k_map = encode(buf.k, type, {D, (cuuint64_t)s.nk, (cuuint64_t)s.hkv, (cuuint64_t)s.b},
                   {D * esz, D * esz * s.nk, D * esz * s.nk * s.hkv}, {cols, (cuuint32_t)bn, 1, 1});
  if (c.fp8) {
    const cuuint64_t kp = fp8_vt_keys(s.nk);
    launch_transpose(s, buf, st);
    a.v_map = encode(buf.vt, type, {kp, D, (cuuint64_t)s.hkv, (cuuint64_t)s.b},
                     {kp, kp * D, kp * D * s.hkv}, {128, (cuuint32_t)s.d, 1, 1});
  } else {
    a.v_map = encode(buf.v, type, {D, (cuuint64_t)s.nk, (cuuint64_t)s.hkv, (cuuint64_t)s.b},
                     {D * esz, D * esz * s.nk, D * esz * s.nk * s.hkv},
                     {cols, (cuuint32_t)bn, 1, 1});
  }
  static std::vector<const void*> raised;
  if (std::find(raised.begin(), raised.end(), c.fn) == raised.end()) {
    CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem)));
    raised.push_back(c.fn);
  }
  const int block_m = 64 * c.consumers;
  const long long tiles = (s.nq + block_m - 1) / block_m;
  dim3 grid(static_cast<unsigned>(tiles), s.b * s.hq);
  if (c.persistent) {
    const long long work = tiles * s.b * s.hq;
    grid = dim3(static_cast<unsigned>(std::min<long long>(work, sms)), 1);
  }
  void* params[] = {&a};
  CK(cudaLaunchKernel(c.fn, grid, dim3(128 * (c.consumers + 1)), params, smem, st));
}

static Buffers alloc(const Shape& s, bool fp8, unsigned long long seed) {
  Buffers b;
  const size_t nq = (size_t)s.b * s.hq * s.nq * s.d, nk = (size_t)s.b * s.hkv * s.nk * s.d;
  const int esz = fp8 ? 1 : 2;
  CK(cudaMalloc(&b.q, nq * esz));
  CK(cudaMalloc(&b.k, nk * esz));
  CK(cudaMalloc(&b.v, nk * esz));
  CK(cudaMalloc(&b.o, nq * 2));
  if (fp8) {
    CK(cudaMalloc(&b.vt, (size_t)s.b * s.hkv * s.d * fp8_vt_keys(s.nk)));
    fill_uniform<e4m3><<<1024, 256>>>(static_cast<e4m3*>(b.q), nq, seed, 4.f);
    fill_uniform<e4m3><<<1024, 256>>>(static_cast<e4m3*>(b.k), nk, seed + 1, 4.f);
    fill_uniform<e4m3><<<1024, 256>>>(static_cast<e4m3*>(b.v), nk, seed + 2, 4.f);
  } else {
    fill_uniform<bf16><<<1024, 256>>>(static_cast<bf16*>(b.q), nq, seed, 1.f);
    fill_uniform<bf16><<<1024, 256>>>(static_cast<bf16*>(b.k), nk, seed + 1, 1.f);
    fill_uniform<bf16><<<1024, 256>>>(static_cast<bf16*>(b.v), nk, seed + 2, 1.f);
  }
  CK(cudaGetLastError());
  return b;
}

static void release(Buffers& b) {
  cudaFree(b.q);
  cudaFree(b.k);
  cudaFree(b.v);
  cudaFree(b.vt);
  cudaFree(b.o);
  b = Buffers{};
}

constexpr float kSq = 0.25f, kSk = 0.25f, kSv = 0.5f;

static int run_checks(int sms) {
  const Shape shapes[] = {{2, 4, 2, 300, 517, 128, false}, {2, 4, 2, 300, 517, 128, true},
                          {1, 2, 1, 1000, 1000, 128, true}, {1, 3, 3, 77, 2049, 128, false},
                          {2, 4, 2, 300, 517, 256, false},  {1, 2, 1, 1000, 1000, 256, true}};
  int failures = 0;
  std::printf("%-28s %-28s %10s %10s %8s\n", "config", "shape", "max_err", "rms_rel", "result");
  for (const Shape& s : shapes) {
    Buffers buf = alloc(s, true, 1234 + s.nq);
    const size_t no = (size_t)s.b * s.hq * s.nq * s.d;
    float *ref = nullptr, *out = nullptr;
    CK(cudaMalloc(&ref, no * 4));
    CK(cudaMalloc(&out, no * 4));
    // The tuner's fp32 reference (attention/reference.cuh) on the dequantised values: Q's and
    // K's scales in the softmax scale, V's as o_scale; O in float.
    FlashAttentionArgs ra = base_args(s, buf);
    ra.o = ref;
    ra.scale *= kSq * kSk;
    ra.o_scale = kSv;
    const dim3 rgrid((s.nq + 7) / 8, s.b * s.hq);
    const auto reference = s.d == 128
        ? (s.causal ? &flash_attention_reference<e4m3, 128, true>
                    : &flash_attention_reference<e4m3, 128, false>)
        : (s.causal ? &flash_attention_reference<e4m3, 256, true>
                    : &flash_attention_reference<e4m3, 256, false>);
    reference<<<rgrid, 256>>>(ra);
    CK(cudaGetLastError());
    std::vector<float> r(no), o(no);
    CK(cudaMemcpy(r.data(), ref, no * 4, cudaMemcpyDeviceToHost));
    for (const Config& c : configs()) {
      if (!c.fp8 || c.d != s.d || c.causal != s.causal) continue;
      fill_nan_bf16<<<1024, 256>>>(static_cast<bf16*>(buf.o), no);
      launch(c, s, buf, kSv, kSq * kSk, sms, 0);
      bf16_to_float<<<1024, 256>>>(static_cast<bf16*>(buf.o), out, no);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(o.data(), out, no * 4, cudaMemcpyDeviceToHost));
      double max_err = 0, num = 0, den = 0, max_ref = 0;
      bool nan = false;
      for (size_t i = 0; i < no; ++i) {
        if (!std::isfinite(o[i])) nan = true;
        const double e = std::fabs((double)o[i] - r[i]);
        max_err = std::max(max_err, e);
        max_ref = std::max(max_ref, (double)std::fabs(r[i]));
        num += e * e;
        den += (double)r[i] * r[i];
      }
      const double rms = std::sqrt(num / std::max(den, 1e-30));
      // P in e4m3 (3 mantissa bits) over many keys: a few percent of rms; a wrong key order or
      // fragment gives ~100 %.
      const bool ok = !nan && rms < 0.03 && max_err < 0.1 * max_ref;
      char shape[64];
      std::snprintf(shape, sizeof shape, "%dx%dx%d %dx%d d%d%s", s.b, s.hq, s.hkv, s.nq, s.nk, s.d,
                    s.causal ? " causal" : "");
      std::printf("%-28s %-28s %10.4f %10.4f %8s\n", c.name.c_str(), shape, max_err, rms,
                  ok ? "ok" : (nan ? "NaN" : "FAIL"));
      failures += !ok;
    }
    cudaFree(ref);
    cudaFree(out);
    release(buf);
  }
  return failures;
}

static double median_ms(const Config& c, const Shape& s, const Buffers& buf, int sms, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch(c, s, buf, kSv, kSq * kSk, sms, 0);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0));
    launch(c, s, buf, kSv, kSq * kSk, sms, 0);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return t[t.size() / 2];
}

static void run_timing(int sms) {
  const Shape shapes[] = {{2, 16, 16, 4096, 4096, 128, false}, {1, 16, 16, 8192, 8192, 128, false},
                          {1, 16, 16, 16384, 16384, 128, false}, {2, 16, 16, 4096, 4096, 128, true},
                          {1, 16, 16, 8192, 8192, 128, true}, {1, 16, 16, 16384, 16384, 128, true},
                          {1, 32, 8, 8192, 8192, 128, true}};
  std::printf("\n%-30s %-26s %9s %9s\n", "config", "shape", "ms", "TFLOP/s");
  std::vector<std::string> summary;
  for (const Shape& s : shapes) {
    Buffers b8 = alloc(s, true, 7), b16 = alloc(s, false, 7);
    CK(cudaDeviceSynchronize());
    const double flops = 4.0 * s.b * s.hq * (double)s.nq * s.nk * s.d * (s.causal ? 0.5 : 1.0);
    double best8 = 1e30, best16 = 1e30;
    std::string n8, n16;
    char shape[64];
    std::snprintf(shape, sizeof shape, "%dx%dx%d n%d d%d%s", s.b, s.hq, s.hkv, s.nq, s.d,
                  s.causal ? " causal" : "");
    for (const Config& c : configs()) {
      if (c.d != s.d || c.causal != s.causal) continue;
      const double ms = median_ms(c, s, c.fp8 ? b8 : b16, sms, 30);
      std::printf("%-30s %-26s %9.4f %9.1f\n", c.name.c_str(), shape, ms, flops / ms / 1e9);
      if (c.fp8 && ms < best8) best8 = ms, n8 = c.name;
      if (!c.fp8 && ms < best16) best16 = ms, n16 = c.name;
    }
    // The transpose alone.
    double tms;
    {
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> t;
      for (int i = 0; i < 23; ++i) {
        CK(cudaEventRecord(e0));
        launch_transpose(s, b8, 0);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 3) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      tms = t[t.size() / 2];
    }
    char line[320];
    std::snprintf(line, sizeof line,
                  "%-26s fp8 %7.1f (%s)  bf16 %7.1f (%s)  fp8/bf16 %.2fx  transpose %.1f us",
                  shape, flops / best8 / 1e9, n8.c_str(), flops / best16 / 1e9, n16.c_str(),
                  best16 / best8, tms * 1e3);
    summary.push_back(line);
    release(b8);
    release(b16);
  }
  std::printf("\nbest of each (TFLOP/s, fp8 includes V's transpose):\n");
  for (const std::string& l : summary) std::printf("%s\n", l.c_str());
}

int main(int argc, char** argv) {
  bool check = argc == 1, time = argc == 1;
  int profile = -1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "check")) check = true;
    if (!std::strcmp(argv[i], "time")) time = true;
    if (!std::strncmp(argv[i], "profile=", 8)) profile = std::atoi(argv[i] + 8);
  }
  CK(cudaFree(nullptr));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (profile >= 0) {
    // Two launches of configs()[profile] on B=1 H=16 N=8192 (for ncu).
    const Config c = configs()[profile];
    const Shape s{1, 16, 16, 8192, 8192, c.d, c.causal};
    Buffers b = alloc(s, c.fp8, 7);
    for (int i = 0; i < 2; ++i) launch(c, s, b, kSv, kSq * kSk, sms, 0);
    CK(cudaDeviceSynchronize());
    std::printf("profiled %s\n", c.name.c_str());
    return 0;
  }
  int failures = 0;
  if (check) failures = run_checks(sms);
  if (time) run_timing(sms);
  std::printf("\n%s\n", failures ? "CHECK FAILED" : "checks ok");
  return failures ? 1 : 0;
}
