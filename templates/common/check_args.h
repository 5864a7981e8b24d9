// Argument structs of the verification kernels in common/check.cuh, shared by the host (g++) and
// NVRTC. Plain fixed-size data; pointers are device addresses.
#pragma once

#if defined(__CUDACC__)
#define KTUNE_HOST_DEVICE __host__ __device__
#else
#define KTUNE_HOST_DEVICE
#endif

namespace ktune {

/// Threads per block of fill_random_kernel and compare_kernel (any grid; both grid-stride).
constexpr int kCheckThreads = 256;

/// fill_random_kernel<T>: data[i] = T(fill_value(seed, i, lo, hi)), an exact zero after
/// rounding replaced by T(hi / 2) (or T(lo / 2) when hi is 0).
struct FillArgs {
  void* data;                // T[count]
  unsigned long long count;  // elements
  unsigned long long seed;
  float lo;                  // values are uniform in [lo, hi)
  float hi;
};

/// fill_ids_kernel: `rows` rows of `row` int32 ids, distinct within a row, uniform in
/// [0, bound) (bound >= row), drawn from fill_hash(seed, .).
struct FillIdsArgs {
  int* data;                 // int[rows * row]
  unsigned long long rows;
  int row;
  int bound;
  unsigned long long seed;
};

/// fill_permutation_kernel: data[i] = fill_permute(seed, i, count), a permutation of
/// [0, count). fill_uniform_int_kernel: data[i] = fill_int_value(seed, i, lo, hi).
struct FillIntArgs {
  int* data;                 // int[count]
  unsigned long long count;  // elements (permutation: also the bound, at most 2^31)
  unsigned long long seed;
  long long lo;              // uniform_int: values in [lo, hi], int32
  long long hi;
};

/// What compare_kernel<T> accumulates. Start from a value-initialised struct (`CompareStats{}`)
/// and launch any number of compare kernels into it.
struct CompareStats {
  unsigned long long bad = 0;                       // elements with |out - ref| > atol + rtol*|ref|
  unsigned long long nonfinite = 0;                 // NaN/Inf outputs where ref is finite
  unsigned long long first_bad = ~0ull;             // lowest index of a bad element
  float max_abs_err = 0.0f;                         // over elements with finite out and ref
  float max_abs_ref = 0.0f;                         // over finite ref
  double sum_sq_err = 0.0;                          // sum of (out - ref)^2, finite elements
  double sum_sq_ref = 0.0;                          // sum of ref^2, finite ref
};

/// compare_kernel<T>: checks out (T: float, bf16, fp16 or int) against ref (float), element by
/// element (int outputs such as MoE's expert ids are compared with rtol = atol = 0).
struct CompareArgs {
  const void* out;           // T[count]
  const float* ref;          // float[count]
  unsigned long long count;
  float rtol;
  float atol;
  CompareStats* stats;       // accumulated into with atomics
  unsigned long long row;    // 0: every element; else only rows r % row_stride == 0 of `row`
  unsigned long long row_stride;  // elements are checked (the reference computed those)
};

/// splitmix64 of (seed, index): the integer hash behind fill_random_kernel.
KTUNE_HOST_DEVICE inline unsigned long long fill_hash(unsigned long long seed,
                                                      unsigned long long index) {
  unsigned long long z = seed * 0x9E3779B97F4A7C15ull + index;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The float fill_random_kernel rounds to T for element `index`: uniform in [lo, hi) on a grid of
/// 2^24 steps.
KTUNE_HOST_DEVICE inline float fill_value(unsigned long long seed, unsigned long long index,
                                          float lo, float hi) {
  const float u = static_cast<float>(fill_hash(seed, index) >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

/// Element `index` (< bound) of a permutation of [0, bound) drawn from `seed`: a 4-round Feistel
/// network on [0, 4^h) (the smallest power of 4 >= bound, so < 4 * bound) is a bijection; walking
/// its cycle until the value falls below bound keeps a bijection of [0, bound) (cycle walking).
/// Each element is independent of the others: one thread per element, a few rounds each.
KTUNE_HOST_DEVICE inline unsigned long long fill_permute(unsigned long long seed,
                                                         unsigned long long index,
                                                         unsigned long long bound) {
  if (bound <= 1) return 0;
  int h = 1;
  while ((1ull << (2 * h)) < bound) ++h;
  const unsigned long long mask = (1ull << h) - 1;
  unsigned long long x = index;
  do {
    unsigned long long l = x >> h, r = x & mask;
    for (unsigned long long round = 0; round < 4; ++round) {
      const unsigned long long f = fill_hash(seed * 4 + round, r) & mask;
      const unsigned long long next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << h) | r;
  } while (x >= bound);
  return x;
}

/// Element `index` of fill_uniform_int_kernel: element 0 is hi and element 1 lo (a tensor of two
/// or more elements always holds both ends), the others uniform in [lo, hi] (lo <= hi).
KTUNE_HOST_DEVICE inline long long fill_int_value(unsigned long long seed, unsigned long long index,
                                                  long long lo, long long hi) {
  if (index == 0) return hi;
  if (index == 1) return lo;
  const unsigned long long span = static_cast<unsigned long long>(hi - lo) + 1;
  return lo + static_cast<long long>(fill_hash(seed, index) % span);
}

}  // namespace ktune
