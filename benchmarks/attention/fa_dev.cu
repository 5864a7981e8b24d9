// Development harness for templates/attention/flash_attention.cuh: checks a table of
// configurations against a naive fp32 reference on the GPU, then times them on the ANCHORS
// attention shapes.
//
// Build (on the GPU machine, or anywhere nvcc is and carry the binary):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/attention/fa_dev.cu -o fa_dev
// Run: ./fa_dev [check] [time] [big] [csv=FILE] [profile=I]   (no argument: check, big, time)
//   profile=I: two launches of configs[I] on B=1 H=16 N=8192 non-causal, for ncu.
//
// Kernels above 48 KiB of dynamic shared memory need cudaFuncSetAttribute(
// cudaFuncAttributeMaxDynamicSharedMemorySize) first (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// through the driver API); run_config() below does it once per kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention/flash_attention.cuh"
#include "benchmarks/attention/dev_util.cuh"

using ktune::FlashAttentionArgs;

// ---------------------------------------------------------------------------------------------
// Device helpers: naive reference, gather of O to fp32.

// One CTA per checked query row: scores in shared memory, fp32 softmax with expf.
template <typename T>
__global__ void reference_attention(FlashAttentionArgs a, int d, bool causal, int row_step,
                                    float* o_ref, float* lse_ref) {
  extern __shared__ float sh[];
  float* qrow = sh;
  float* scores = sh + d;
  __shared__ float red[32];
  const int row = blockIdx.x * row_step;
  if (row >= a.seq_q) return;
  const int b = blockIdx.y / a.heads_q, h = blockIdx.y % a.heads_q;
  const int hk = h / (a.heads_q / a.heads_kv);
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + h * a.q_head_stride +
               row * a.q_row_stride;
  const T* k = static_cast<const T*>(a.k) + b * a.k_batch_stride + hk * a.k_head_stride;
  const T* v = static_cast<const T*>(a.v) + b * a.v_batch_stride + hk * a.v_head_stride;
  for (int i = threadIdx.x; i < d; i += blockDim.x) qrow[i] = ktune::to_float(q[i]);
  __syncthreads();
  const int nk = a.seq_k;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < nk; j += blockDim.x) {
    float s = 0.f;
    for (int i = 0; i < d; ++i) s += qrow[i] * ktune::to_float(k[j * a.k_row_stride + i]);
    s *= a.scale;
    if (causal && j > row + nk - a.seq_q) s = -INFINITY;
    scores[j] = s;
    mx = fmaxf(mx, s);
  }
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < int(blockDim.x / 32); ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < nk; j += blockDim.x) {
    const float p = scores[j] == -INFINITY ? 0.f : expf(scores[j] - mx);
    scores[j] = p;
    sum += p;
  }
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) sum += red[w];
  const size_t out_row = (size_t(b) * a.heads_q + h) * a.seq_q + row;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < nk; ++j) acc += scores[j] * ktune::to_float(v[j * a.v_row_stride + i]);
    o_ref[out_row * d + i] = sum > 0.f ? acc / sum : 0.f;
  }
  if (threadIdx.x == 0) lse_ref[out_row] = sum > 0.f ? mx + logf(sum) : -INFINITY;
}

template <typename T>
__global__ void gather_o(FlashAttentionArgs a, int d, float* out) {
  const int row = blockIdx.x;
  const int b = blockIdx.y / a.heads_q, h = blockIdx.y % a.heads_q;
  const T* o = static_cast<const T*>(a.o) + b * a.o_batch_stride + h * a.o_head_stride +
               row * a.o_row_stride;
  const size_t out_row = (size_t(b) * a.heads_q + h) * a.seq_q + row;
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[out_row * d + i] = ktune::to_float(o[i]);
}

// ---------------------------------------------------------------------------------------------
// The table of configurations.

using KernelFn = void (*)(FlashAttentionArgs);

struct Config {
  std::string dtype;  // "bf16" or "fp16"
  int d, block_m, block_n, warps, stages;
  bool q_in_regs;
  int min_ctas;
  bool pad;
  KernelFn kernel[2];  // [causal]
  std::string name() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%dx%d w%d s%d %s%s%s", block_m, block_n, warps, stages,
                  q_in_regs ? "qreg" : "qsmem",
                  min_ctas > 1 ? (" o" + std::to_string(min_ctas)).c_str() : "", pad ? " pad" : "");
    return buf;
  }
  unsigned smem() const {
    return ktune::flash_attention_smem_bytes(d, block_m, block_n, stages, pad);
  }
};

#define FA_CFG(T, D, BM, BN, W, S, QR, OCC, PAD)                                           \
  Config {                                                                                  \
    #T, D, BM, BN, W, S, QR, OCC, PAD, {                                                    \
      &ktune::flash_attention_fwd<ktune::T, D, BM, BN, W, S, false, QR, OCC, PAD>,         \
      &ktune::flash_attention_fwd<ktune::T, D, BM, BN, W, S, true, QR, OCC, PAD>           \
    }                                                                                       \
  }

static std::vector<Config> all_configs() {
  return {
      // D = 128 (index 0 is also the N = 32768 timing config)
      FA_CFG(bf16, 128, 128, 64, 4, 2, false, 1, false),
      FA_CFG(bf16, 128, 128, 64, 4, 2, false, 1, true),
      FA_CFG(bf16, 128, 256, 64, 8, 2, false, 1, false),
      FA_CFG(bf16, 128, 256, 64, 8, 2, false, 1, true),
      FA_CFG(bf16, 128, 128, 64, 8, 2, true, 1, false),
      FA_CFG(bf16, 128, 128, 128, 8, 2, true, 1, false),
      // D = 64
      FA_CFG(bf16, 64, 128, 64, 4, 2, true, 1, false),
      FA_CFG(bf16, 64, 128, 64, 4, 2, true, 1, true),
      FA_CFG(bf16, 64, 128, 64, 4, 2, false, 1, false),
      FA_CFG(bf16, 64, 128, 64, 4, 2, false, 1, true),
      FA_CFG(bf16, 64, 64, 64, 4, 2, true, 3, false),
      FA_CFG(bf16, 64, 64, 64, 4, 2, true, 3, true),
      // fp16 and the other head dims
      FA_CFG(fp16, 128, 128, 64, 4, 2, false, 1, false),
      FA_CFG(fp16, 64, 128, 64, 4, 2, true, 1, false),
      FA_CFG(bf16, 32, 128, 64, 8, 2, true, 1, false),
      FA_CFG(bf16, 32, 128, 64, 4, 2, true, 1, true),
      FA_CFG(bf16, 96, 128, 64, 8, 2, true, 1, false),
      FA_CFG(bf16, 96, 128, 64, 8, 2, true, 1, true),
      FA_CFG(bf16, 256, 128, 32, 8, 2, false, 1, false),
      FA_CFG(bf16, 256, 64, 32, 4, 2, false, 1, true),
  };
}

// ---------------------------------------------------------------------------------------------
// Problems.

struct Shape {
  int b, hq, hkv, nq, nk, d;
  bool bshd;  // [B, S, H, D] when true, else [B, H, S, D]
};

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
  size_t q_elems = 0, kv_elems = 0;
  void release() {
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(lse);
    *this = Buffers{};
  }
};

static FlashAttentionArgs make_args(const Shape& s, const Buffers& buf) {
  FlashAttentionArgs a{};
  a.q = buf.q, a.k = buf.k, a.v = buf.v, a.o = buf.o, a.lse = buf.lse;
  auto strides = [&](int h, int n, long long& bs, long long& hs, long long& rs) {
    if (s.bshd) {
      bs = 1LL * n * h * s.d, hs = s.d, rs = 1LL * h * s.d;
    } else {
      bs = 1LL * h * n * s.d, hs = 1LL * n * s.d, rs = s.d;
    }
  };
  strides(s.hq, s.nq, a.q_batch_stride, a.q_head_stride, a.q_row_stride);
  strides(s.hq, s.nq, a.o_batch_stride, a.o_head_stride, a.o_row_stride);
  strides(s.hkv, s.nk, a.k_batch_stride, a.k_head_stride, a.k_row_stride);
  strides(s.hkv, s.nk, a.v_batch_stride, a.v_head_stride, a.v_row_stride);
  a.batch = s.b, a.heads_q = s.hq, a.heads_kv = s.hkv, a.seq_q = s.nq, a.seq_k = s.nk;
  a.scale = 1.f / std::sqrt(float(s.d));
  return a;
}

static Buffers alloc_inputs(const Shape& s, const std::string& dtype, unsigned long long seed) {
  Buffers buf;
  buf.q_elems = size_t(s.b) * s.hq * s.nq * s.d;
  buf.kv_elems = size_t(s.b) * s.hkv * s.nk * s.d;
  CK(cudaMalloc(&buf.q, buf.q_elems * 2));
  CK(cudaMalloc(&buf.o, buf.q_elems * 2));
  CK(cudaMalloc(&buf.k, buf.kv_elems * 2));
  CK(cudaMalloc(&buf.v, buf.kv_elems * 2));
  CK(cudaMalloc(&buf.lse, size_t(s.b) * s.hq * s.nq * sizeof(float)));
  // Q and K wide enough that softmax rows are peaked (score std ~2), V in [-1, 1].
  auto fill = [&](void* p, size_t n, unsigned long long sd, float amp) {
    if (dtype == "bf16")
      fill_uniform<ktune::bf16><<<1024, 256>>>(static_cast<ktune::bf16*>(p), n, sd, amp);
    else
      fill_uniform<ktune::fp16><<<1024, 256>>>(static_cast<ktune::fp16*>(p), n, sd, amp);
    CK(cudaGetLastError());
  };
  fill(buf.q, buf.q_elems, seed * 3 + 1, 2.5f);
  fill(buf.k, buf.kv_elems, seed * 3 + 2, 2.5f);
  fill(buf.v, buf.kv_elems, seed * 3 + 3, 1.0f);
  return buf;
}

static void launch(const Config& c, bool causal, const FlashAttentionArgs& a, cudaStream_t st = 0) {
  const void* fn = reinterpret_cast<const void*>(c.kernel[causal]);
  static std::vector<const void*> raised;
  if (std::find(raised.begin(), raised.end(), fn) == raised.end()) {
    CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(c.smem())));
    raised.push_back(fn);
  }
  dim3 grid(ktune::flash_attention_grid_x(a.seq_q, c.block_m), a.batch * a.heads_q);
  FlashAttentionArgs copy = a;
  void* params[] = {&copy};
  CK(cudaLaunchKernel(fn, grid, dim3(c.warps * 32), params, c.smem(), st));
}

// ---------------------------------------------------------------------------------------------
// Correctness.

struct Reference {
  std::vector<float> o, lse;
};

static Reference run_reference(const Shape& s, const std::string& dtype, const Buffers& buf,
                               bool causal, int row_step) {
  FlashAttentionArgs a = make_args(s, buf);
  const size_t rows = size_t(s.b) * s.hq * s.nq;
  float *o_ref, *lse_ref;
  CK(cudaMalloc(&o_ref, rows * s.d * sizeof(float)));
  CK(cudaMalloc(&lse_ref, rows * sizeof(float)));
  dim3 grid((s.nq + row_step - 1) / row_step, s.b * s.hq);
  const size_t shm = (s.nk + s.d) * sizeof(float);
  if (dtype == "bf16") {
    CK(cudaFuncSetAttribute(reference_attention<ktune::bf16>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    reference_attention<ktune::bf16><<<grid, 256, shm>>>(a, s.d, causal, row_step, o_ref, lse_ref);
  } else {
    CK(cudaFuncSetAttribute(reference_attention<ktune::fp16>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    reference_attention<ktune::fp16><<<grid, 256, shm>>>(a, s.d, causal, row_step, o_ref, lse_ref);
  }
  CK(cudaGetLastError());
  Reference r;
  r.o.resize(rows * s.d);
  r.lse.resize(rows);
  CK(cudaMemcpy(r.o.data(), o_ref, r.o.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.lse.data(), lse_ref, r.lse.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(o_ref), cudaFree(lse_ref);
  return r;
}

struct CheckResult {
  double rel_l2 = 0, max_abs = 0, lse_max = 0;
  long long bad = 0;  // NaN, unwritten, or -inf mismatches
};

static CheckResult check_config(const Config& c, bool causal, const Shape& s, const Buffers& buf,
                                const Reference& ref, int row_step, bool with_lse) {
  FlashAttentionArgs a = make_args(s, buf);
  if (!with_lse) a.lse = nullptr;
  const size_t rows = size_t(s.b) * s.hq * s.nq;
  CK(cudaMemset(buf.o, 0xff, buf.q_elems * 2));  // NaN in bf16 and fp16
  CK(cudaMemset(buf.lse, 0xff, rows * sizeof(float)));
  launch(c, causal, a);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float* o32;
  CK(cudaMalloc(&o32, rows * s.d * sizeof(float)));
  dim3 grid(s.nq, s.b * s.hq);
  if (c.dtype == "bf16")
    gather_o<ktune::bf16><<<grid, 128>>>(a, s.d, o32);
  else
    gather_o<ktune::fp16><<<grid, 128>>>(a, s.d, o32);
  CK(cudaGetLastError());
  std::vector<float> o(rows * s.d), lse(rows);
  CK(cudaMemcpy(o.data(), o32, o.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), buf.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(o32);
  CheckResult r;
  double num = 0, den = 0;
  for (size_t bh = 0; bh < size_t(s.b) * s.hq; ++bh)
    for (int row = 0; row < s.nq; row += row_step) {
      const size_t ri = bh * s.nq + row;
      for (int i = 0; i < s.d; ++i) {
        const double x = o[ri * s.d + i], y = ref.o[ri * s.d + i];
        if (!std::isfinite(x)) {
          ++r.bad;
          continue;
        }
        num += (x - y) * (x - y), den += y * y;
        r.max_abs = std::max(r.max_abs, std::fabs(x - y));
      }
      if (with_lse) {
        const float x = lse[ri], y = ref.lse[ri];
        if (std::isinf(y) || std::isinf(x)) {
          if (!(std::isinf(x) && std::isinf(y) && x < 0 && y < 0)) ++r.bad;
        } else if (!std::isfinite(x)) {
          ++r.bad;
        } else {
          r.lse_max = std::max(r.lse_max, double(std::fabs(x - y)));
        }
      }
    }
  r.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return r;
}

static int run_checks(const std::vector<Config>& configs, bool big) {
  std::vector<Shape> shapes = {
      {1, 2, 2, 1, 1, 0, false},     {2, 4, 4, 17, 17, 0, true},    {1, 4, 1, 17, 1000, 0, false},
      {2, 8, 2, 1000, 17, 0, true},  {1, 2, 2, 1000, 1000, 0, false}, {1, 2, 1, 4097, 4097, 0, true},
      {1, 4, 4, 333, 4097, 0, false}, {2, 4, 4, 4097, 1000, 0, true}, {1, 2, 2, 128, 128, 0, true},
      {1, 3, 3, 256, 64, 0, false},  {1, 4, 2, 64, 300, 0, true},    {3, 2, 2, 200, 1, 0, false},
      {2, 8, 4, 130, 4097, 0, false},  // causal head groups of 11 + 5 at D=128
  };
  if (big) shapes = {{1, 2, 1, 32768, 32768, 0, false}, {1, 2, 2, 32768, 32768, 0, true}};
  const int row_step = big ? 509 : 1;
  int failures = 0, runs = 0;
  std::vector<std::pair<std::string, int>> dtype_d;
  for (const Config& c : configs) {
    if (big && (c.dtype != "bf16" || (c.d != 64 && c.d != 128))) continue;
    auto key = std::make_pair(c.dtype, c.d);
    if (std::find(dtype_d.begin(), dtype_d.end(), key) == dtype_d.end()) dtype_d.push_back(key);
  }
  unsigned long long seed = 1;
  for (auto [dtype, d] : dtype_d) {
    for (Shape s : shapes) {
      s.d = d;
      for (int layout = 0; layout < 2; ++layout) {
        if (big && layout == 1) continue;
        s.bshd = layout == 1 ? !s.bshd : s.bshd;
        Buffers buf = alloc_inputs(s, dtype, seed++);
        for (int causal = 0; causal < 2; ++causal) {
          Reference ref = run_reference(s, dtype, buf, causal, row_step);
          for (const Config& c : configs) {
            if (c.dtype != dtype || c.d != d) continue;
            const bool with_lse = (runs % 5) != 3;  // sometimes pass lse = nullptr
            CheckResult r = check_config(c, causal, s, buf, ref, row_step, with_lse);
            ++runs;
            const double tol = dtype == "bf16" ? 1e-2 : 2e-3;
            const bool ok = r.bad == 0 && r.rel_l2 < tol && r.lse_max < 2e-3 && r.max_abs < 0.1;
            if (!ok || big)
              std::printf("%s %s D=%d %s B=%d Hq=%d Hkv=%d Nq=%d Nk=%d %s %s: rel_l2=%.2e max=%.2e "
                          "lse=%.2e bad=%lld\n",
                          ok ? "ok  " : "FAIL", dtype.c_str(), d, c.name().c_str(), s.b, s.hq, s.hkv,
                          s.nq, s.nk, s.bshd ? "BSHD" : "BHSD", causal ? "causal" : "full", r.rel_l2,
                          r.max_abs, r.lse_max, r.bad);
            failures += !ok;
          }
        }
        buf.release();
      }
    }
  }
  std::printf("correctness: %d runs, %d passed, %d failed\n", runs, runs - failures, failures);
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Timing.

static double median_ms(const Config& c, bool causal, const FlashAttentionArgs& a, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch(c, causal, a);
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0));
    launch(c, causal, a);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[i], e0, e1));
  }
  CK(cudaGetLastError());
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

static void run_timing(const std::vector<Config>& configs, FILE* csv) {
  struct T { int b, h, n, d; bool causal; };
  const std::vector<T> shapes = {
      {16, 16, 512, 64, false}, {8, 16, 1024, 64, false}, {4, 16, 2048, 64, false},
      {2, 16, 4096, 64, false}, {1, 16, 8192, 64, false}, {2, 16, 4096, 64, true},
      {1, 16, 8192, 64, true},  {16, 16, 512, 128, false}, {8, 16, 1024, 128, false},
      {2, 16, 4096, 128, false}, {1, 16, 8192, 128, false}, {1, 16, 16384, 128, false},
      {2, 16, 4096, 128, true}, {1, 16, 8192, 128, true}, {1, 16, 16384, 128, true},
  };
  std::printf("\n%-28s %-26s %9s %8s\n", "shape (B H N D causal)", "config", "ms", "TFLOP/s");
  for (const T& t : shapes) {
    Shape s{t.b, t.h, t.h, t.n, t.n, t.d, false};
    Buffers buf = alloc_inputs(s, "bf16", 1000 + t.n + t.d);
    const FlashAttentionArgs a = make_args(s, buf);
    const double flops = 4.0 * t.b * t.h * double(t.n) * t.n * t.d / (t.causal ? 2 : 1);
    char shape[64];
    std::snprintf(shape, sizeof shape, "%d %d %d %d %s", t.b, t.h, t.n, t.d, t.causal ? "causal" : "full");
    for (const Config& c : configs) {
      if (c.dtype != "bf16" || c.d != t.d) continue;
      const double ms = median_ms(c, t.causal, a, 30);
      const double tf = flops / (ms * 1e-3) / 1e12;
      std::printf("%-28s %-26s %9.3f %8.1f\n", shape, c.name().c_str(), ms, tf);
      if (csv) std::fprintf(csv, "%d,%d,%d,%d,%d,%s,%.5f,%.2f\n", t.b, t.h, t.n, t.d, int(t.causal),
                            c.name().c_str(), ms, tf);
    }
    buf.release();
  }
  // Long sequence: N = 32768 must run (no N x N buffer).
  for (int causal = 0; causal < 2; ++causal) {
    Shape s{1, 16, 16, 32768, 32768, 128, false};
    Buffers buf = alloc_inputs(s, "bf16", 77);
    const FlashAttentionArgs a = make_args(s, buf);
    const Config& c = configs[0];
    const double ms = median_ms(c, causal, a, 5);
    const double tf = 4.0 * 16 * 32768.0 * 32768 * 128 / (causal ? 2 : 1) / (ms * 1e-3) / 1e12;
    std::printf("%-28s %-26s %9.3f %8.1f\n", causal ? "1 16 32768 128 causal" : "1 16 32768 128 full",
                c.name().c_str(), ms, tf);
    if (csv) std::fprintf(csv, "1,16,32768,128,%d,%s,%.5f,%.2f\n", causal, c.name().c_str(), ms, tf);
    buf.release();
  }
}

int main(int argc, char** argv) {
  bool do_check = false, do_time = false, do_big = false;
  int profile = -1;
  std::string csv_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "check")) do_check = true;
    else if (!std::strcmp(argv[i], "time")) do_time = true;
    else if (!std::strcmp(argv[i], "big")) do_big = true;
    else if (!std::strncmp(argv[i], "csv=", 4)) csv_path = argv[i] + 4;
    else if (!std::strncmp(argv[i], "profile=", 8)) profile = std::atoi(argv[i] + 8);
  }
  if (profile >= 0) {
    const Config c = all_configs().at(profile);
    Shape s{1, 16, 16, 8192, 8192, c.d, false};
    Buffers buf = alloc_inputs(s, c.dtype, 5);
    const FlashAttentionArgs a = make_args(s, buf);
    for (int i = 0; i < 2; ++i) launch(c, false, a);
    CK(cudaDeviceSynchronize());
    std::printf("profiled %s D=%d %s\n", c.dtype.c_str(), c.d, c.name().c_str());
    return 0;
  }
  if (!do_check && !do_time && !do_big) do_check = do_time = do_big = true;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %d KiB smem/block opt-in\n", prop.name, prop.multiProcessorCount,
              int(prop.sharedMemPerBlockOptin / 1024));
  const std::vector<Config> configs = all_configs();
  for (const Config& c : configs)
    for (int causal = 0; causal < 2; ++causal) {
      cudaFuncAttributes fa;
      CK(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(c.kernel[causal])));
      if (causal == 0 || fa.localSizeBytes)
        std::printf("  %s D=%d %-24s causal=%d regs=%d local=%zu smem=%u\n", c.dtype.c_str(), c.d,
                    c.name().c_str(), causal, fa.numRegs, fa.localSizeBytes, c.smem());
    }
  int failures = 0;
  if (do_check) failures += run_checks(configs, false);
  if (do_big) failures += run_checks(configs, true);
  if (do_time) {
    FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
    run_timing(configs, csv);
    if (csv) std::fclose(csv);
  }
  return failures ? 1 : 0;
}
