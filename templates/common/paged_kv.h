// Geometry of a paged K/V cache, shared by the kernels that read one (flash_decode's split
// kernel, flash_attention's two kernels) and their host code: no headers, plain types only.
//
// K and V are pools [num_pages, PAGE, Hkv, D] (vLLM's NHD layout); sequence b's key j lives in
// page block_table[b * pages_per_seq + j / PAGE], row j % PAGE. PAGE is a power of 2 (16..256)
// and key tiles of BLOCK_N keys (a power of 2) start at multiples of BLOCK_N, so a tile lies in
// one page or covers whole pages.
#pragma once

#if defined(__CUDACC__)
#define KTUNE_PAGED_HD __host__ __device__
#else
#define KTUNE_PAGED_HD
#endif

namespace ktune {

/// Pages a sequence of seq_k keys spans: one block table row.
KTUNE_PAGED_HD constexpr long long paged_kv_pages(long long seq_k, int page) {
  return (seq_k + page - 1) / page;
}

/// Page ids one K/V tile of BLOCK_N keys needs.
KTUNE_PAGED_HD constexpr int paged_kv_slots(int block_n, int page) {
  return page >= block_n ? 1 : block_n / page;
}

/// A copy where thread t takes rows rt + i * rpi of a tile (rpi rows per pass and rt < rpi, both
/// powers of 2): which of the tile's page ids row rt + i * rpi uses, written so that it is a
/// compile-time constant plus at most a per-thread one (no division per copy).
KTUNE_PAGED_HD constexpr int paged_kv_copy_slot(int i, int rt, int rpi, int block_n, int page) {
  return page >= block_n ? 0 : (rpi <= page ? i * rpi / page : i * rpi / page + rt / page);
}

/// Row inside its page of key key0 + rt + i * rpi (key0: the tile's first key, a multiple of
/// block_n).
KTUNE_PAGED_HD constexpr int paged_kv_copy_row(long long key0, int i, int rt, int rpi,
                                               int block_n, int page) {
  return page >= block_n ? static_cast<int>(key0 % page) + rt + i * rpi
                         : (rpi <= page ? i * rpi % page + rt : rt % page);
}

/// Row r of a tile whose first key is key0 (any r < block_n): its page slot and row in the page.
KTUNE_PAGED_HD constexpr int paged_kv_slot_of(int r, int block_n, int page) {
  return page >= block_n ? 0 : r / page;
}
KTUNE_PAGED_HD constexpr int paged_kv_row_of(long long key0, int r, int block_n, int page) {
  return page >= block_n ? static_cast<int>(key0 % page) + r : r % page;
}

/// A sequence's key count as the kernels use it: seq_lens[b] clamped to [0, seq_k].
KTUNE_PAGED_HD constexpr int paged_kv_seq_len(int len, int seq_k) {
  return len < 0 ? 0 : (len > seq_k ? seq_k : len);
}

}  // namespace ktune
