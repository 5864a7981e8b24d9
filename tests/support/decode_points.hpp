// The flash_decode points that GPU tests run, built where a CPU test can check them too: a GPU
// test's point that the op refuses fails only on a GPU (stop 75: the paged test set kv_split by
// position, and after `tma` became the last tunable it asked for tma=1 over pages), so
// decode_ops_test asserts that every point these helpers give is valid on sm_80 and sm_90a.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "search/space.hpp"
#include "templates/op.hpp"

namespace ktune::test {

/// The problem dims GpuDecodePaged.MixedLengthsMatchTheReference runs, at every d of `head_dims`
/// (d = 96's rows, 12 chunks, are copied by 16 threads each), causal and not, GQA 4:1, MQA 16:1
/// and MHA.
inline const std::vector<const char*>& paged_test_dims() {
  static const std::vector<const char*> dims{"b=5,hq=32,hkv=8,nq=1,nk=1000",
                                             "b=4,hq=16,hkv=1,nq=5,nk=4099",
                                             "b=3,hq=8,hkv=8,nq=33,nk=300"};
  return dims;
}
inline const std::vector<std::int64_t>& paged_test_head_dims() {
  static const std::vector<std::int64_t> d{32, 64, 80, 96, 128, 256};
  return d;
}

/// The default, the point with the most splits (with a window: splits wholly left of it), and
/// one with another tile size and several splits; the default alone where nothing is valid.
inline std::vector<Params> spread_points(const Op& op, const Problem& p, DType t,
                                         const DeviceInfo& device) {
  std::vector<Params> points{op.default_params(p, t, device)};
  const std::vector<Params> valid = Space(op, p, t, device).valid_points();
  if (valid.empty()) return points;
  points.push_back(*std::max_element(
      valid.begin(), valid.end(),
      [](const Params& a, const Params& b) { return a.values[0] < b.values[0]; }));
  for (const Params& v : valid)
    if (v.values[2] != points[0].values[2] && v.values[0] > 1) {
      points.push_back(v);
      break;
    }
  return points;
}

/// The points GpuDecodePaged.MixedLengthsMatchTheReference runs for paged problem `p` of head
/// dim `d`: spread_points, and for d = 72-96 (d=96's tiles) the default's tile split in two
/// (kv_split=1).
inline std::vector<Params> paged_test_points(const Op& op, const Problem& p, DType t,
                                             const DeviceInfo& device, std::int64_t d) {
  std::vector<Params> points = spread_points(op, p, t, device);
  if (points.size() > 1 && d > 64 && d <= 96) {
    Params split = points[0];
    split.values[op.param_index("kv_split")] = 1;
    points.push_back(split);
  }
  return points;
}

/// The points GpuDecodeVariants runs: spread_points, and the default's tiles copied by tensor
/// maps (tma=1) where that is valid.
inline std::vector<Params> variant_test_points(const Op& op, const Problem& p, DType t,
                                               const DeviceInfo& device) {
  std::vector<Params> points = spread_points(op, p, t, device);
  Params copied = points[0];
  copied.values[op.param_index("tma")] = 1;
  if (!op.invalid_reason(copied, p, t, device)) points.push_back(copied);
  return points;
}

/// GpuDecode's head dims (HeadDims: 32, 64, 128, 256; BetweenTiles: 40 and 80).
inline const std::vector<std::int64_t>& suite_head_dims() {
  static const std::vector<std::int64_t> d{32, 64, 128, 256, 40, 80};
  return d;
}

/// The problems GpuDecode.ClusterMergeGivesTheCombinesBits runs at each head dim.
inline const std::vector<const char*>& cluster_test_dims() {
  static const std::vector<const char*> dims{
      "b=1,hq=64,hkv=8,nq=1,nk=4099", "b=3,hq=32,hkv=8,nq=5,nk=1000,causal=yes",
      "b=2,hq=16,hkv=1,nq=33,nk=4099,causal=yes", "b=2,hq=32,hkv=8,nq=1,nk=4099,window=300"};
  return dims;
}

/// (combine, merged) pairs that test compares: the default at 2, 4, 8 and 16 splits through the
/// combine kernel (merge=0) where that is valid, beside the same with the splits merged in a
/// cluster (merge=1), which the test requires valid.
inline std::vector<std::pair<Params, Params>> cluster_test_pairs(const Op& op, const Problem& p,
                                                                 DType t,
                                                                 const DeviceInfo& device) {
  const std::size_t splits = op.param_index("splits"), merge = op.param_index("merge");
  std::vector<std::pair<Params, Params>> pairs;
  for (std::int64_t n : {2, 4, 8, 16}) {
    Params combine = op.default_params(p, t, device);
    combine.values[splits] = n;
    combine.values[merge] = 0;
    Params merged = combine;
    merged.values[merge] = 1;
    if (!op.invalid_reason(combine, p, t, device)) pairs.emplace_back(combine, merged);
  }
  return pairs;
}

/// The problems GpuDecode.TmaGivesTheCpAsyncBits runs at each head dim.
inline const std::vector<const char*>& tma_test_dims() {
  static const std::vector<const char*> dims{
      "b=1,hq=64,hkv=8,nq=1,nk=4099", "b=3,hq=32,hkv=8,nq=5,nk=1000,causal=yes",
      "b=2,hq=16,hkv=1,nq=33,nk=777,causal=yes", "b=2,hq=32,hkv=8,nq=1,nk=4099,window=300"};
  return dims;
}

/// The points that test runs with tma=0 and with tma=1 (it requires both valid): the default,
/// three other tile shapes of the space (the first, middle and last unmerged tma=0 tile), and
/// the default at 4 splits merged in a cluster where that is valid. Fewer than 5 points: the
/// space had fewer than 3 other tiles (the test fails on that).
inline std::vector<Params> tma_test_points(const Op& op, const Problem& p, DType t,
                                           const DeviceInfo& device) {
  const std::size_t tma = op.param_index("tma"), merge = op.param_index("merge");
  const std::size_t splits = op.param_index("splits");
  std::vector<Params> points{op.default_params(p, t, device)};
  std::vector<Params> others;
  std::set<std::vector<std::int64_t>> tiles;
  for (const Params& x : Space(op, p, t, device).valid_points())
    if (x.values[tma] == 0 && x.values[merge] == 0 &&
        tiles.insert({x.values[1], x.values[2], x.values[3], x.values[4]}).second)
      others.push_back(x);
  if (others.size() < 3) return points;
  for (std::size_t i : {std::size_t{0}, others.size() / 2, others.size() - 1})
    points.push_back(others[i]);
  Params merged = points[0];
  merged.values[splits] = 4;
  merged.values[merge] = 1;
  if (!op.invalid_reason(merged, p, t, device)) points.push_back(merged);
  return points;
}

}  // namespace ktune::test
