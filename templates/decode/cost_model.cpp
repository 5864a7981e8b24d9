// The decode defaults' cost model (cost_model.hpp): features, the trees' walk, and the search
// over the decode space. The trees are data: cost_model_h100.inc, written by
// benchmarks/decode/fit_cost_model.py.
#include "templates/decode/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "templates/device_class.hpp"

namespace ktune::decode {
namespace {

#include "templates/decode/cost_model_h100.inc"

constexpr int kH100Sms = 132;
// Shared memory per SM the feature of CTAs per SM assumes (Hopper's 228 KiB), as the fit did.
constexpr std::int64_t kFeatureSmemPerSm = 233472;

/// The value of the leaf that features `x` reach in the tree rooted at `root`.
double leaf(const CostNode* nodes, int root, const std::vector<double>& x) {
  const CostNode* n = &nodes[root];
  while (n->feature >= 0)
    n = &nodes[x[static_cast<std::size_t>(n->feature)] <= n->value ? n->left : n->right];
  return n->value;
}

bool switched_off() {
  const char* v = std::getenv("KTUNE_DECODE_COST_MODEL");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

}  // namespace

std::vector<double> cost_model_features(const Shape& s, std::int64_t data_d, const Config& c,
                                        int sm_count) {
  const auto l2 = [](double v) { return std::log2(v); };
  const std::int64_t rows = s.rows();
  const std::int64_t pairs = s.b * s.hkv;
  const std::int64_t row_tiles = (rows + c.block_m - 1) / c.block_m;
  const std::int64_t ctas = pairs * row_tiles * c.splits;
  const std::int64_t smem =
      static_cast<std::int64_t>(c.stages) * c.block_n * s.d * 4 + std::int64_t{c.block_m} * s.d * 2;
  const std::int64_t fit =
      std::max<std::int64_t>(1, std::min<std::int64_t>(32, kFeatureSmemPerSm / (smem + 1024)));
  const std::int64_t slots = fit * sm_count;
  const std::int64_t waves = (ctas + slots - 1) / slots;
  const std::int64_t tiles = (s.nk + c.block_n - 1) / c.block_n;
  const double sms = sm_count;
  return {l2(static_cast<double>(s.b)),
          l2(static_cast<double>(s.hq)),
          l2(static_cast<double>(s.hkv)),
          static_cast<double>(s.nq),
          l2(static_cast<double>(s.nk)),
          static_cast<double>(s.d),
          static_cast<double>(data_d),
          s.causal ? 1.0 : 0.0,
          l2(static_cast<double>(rows)),
          l2(static_cast<double>(pairs)),
          static_cast<double>(c.splits),
          static_cast<double>(c.block_m),
          static_cast<double>(c.block_n),
          static_cast<double>(c.warps),
          static_cast<double>(c.stages),
          static_cast<double>(c.merge),
          static_cast<double>(c.kv_split),
          static_cast<double>(c.tma),
          l2(static_cast<double>(ctas)),
          static_cast<double>(ctas) / sms,
          l2(static_cast<double>(s.nk) / c.splits),
          static_cast<double>(tiles) / c.splits,
          static_cast<double>(smem) / 1024,
          static_cast<double>(fit),
          static_cast<double>(waves),
          static_cast<double>(ctas) / static_cast<double>(slots),
          static_cast<double>(row_tiles * c.block_m) / static_cast<double>(rows),
          static_cast<double>(row_tiles),
          l2(static_cast<double>(pairs * s.nk * data_d * 4 * row_tiles))};
}

double cost_model_predict_h100(const std::vector<double>& x) {
  double total = kH100Baseline;
  for (const int root : kH100Roots) total += leaf(kH100Nodes, root, x);
  return total;
}

bool cost_model_serves(const Shape& s, const DeviceInfo& device) {
  if (device.cc_major != 9 || device.cc_minor != 0 || device.sm_count != kH100Sms ||
      device.memory_bandwidth <= 0 || fast_memory_per_sm(device) || s.paged() || s.varlen ||
      s.variants() || switched_off())
    return false;
  const CostModelDomain& d = kH100Domain;
  const std::int64_t pairs = s.b * s.hkv;
  return s.nk >= d.min_nk && s.nk <= d.max_nk && pairs >= d.min_pairs && pairs <= d.max_pairs &&
         s.rows() >= d.min_rows && s.rows() <= d.max_rows && pairs * s.nk <= d.max_pair_keys;
}

const std::vector<std::vector<std::int64_t>>& cost_model_values() { return kTunableValues; }

std::optional<Params> cost_model_params(const Shape& s, std::int64_t data_d,
                                        const DeviceInfo& device, const Params& rules,
                                        const std::function<bool(const Params&)>& valid) {
  if (!cost_model_serves(s, device)) return std::nullopt;
  // The valid points and their features first, then the trees one at a time over all of them
  // (each tree's nodes stay in cache): the same sums as cost_model_predict_h100, added in the
  // same order.
  const auto& v = cost_model_values();
  // Row tiles taller than the packed rows need (the smallest of 16, 32, 64 holding them) only
  // pad: the model never picked one (0 of 1472 random problems of its domain, 2026-12-07), and
  // leaving them out makes the search up to 3x shorter.
  std::int64_t tallest = v[kBlockM].back();
  for (std::int64_t m : v[kBlockM])
    if (m >= s.rows()) {
      tallest = m;
      break;
    }
  std::vector<Params> points;
  std::vector<std::vector<double>> xs;
  for (std::int64_t splits : v[kSplits])
    for (std::int64_t block_n : v[kBlockN]) {
      const int bn = static_cast<int>(block_n);
      if (flash_decode_used_splits(split_span(s, bn), bn, static_cast<int>(splits)) != splits)
        continue;  // an empty split: never valid
      for (std::int64_t block_m : v[kBlockM]) {
        if (block_m > tallest) break;
        for (std::int64_t warps : v[kWarps])
          for (std::int64_t stages : v[kStages])
            for (std::int64_t merge : v[kMerge])
              for (std::int64_t kv_split : v[kKvSplit])
                for (std::int64_t tma : v[kTma]) {
                  const Config c{static_cast<int>(splits), static_cast<int>(block_m), bn,
                                 static_cast<int>(warps),  static_cast<int>(stages),
                                 static_cast<int>(merge),  static_cast<int>(kv_split),
                                 static_cast<int>(tma)};
                  Params p = params_of(c);
                  if (!valid(p)) continue;
                  xs.push_back(cost_model_features(s, data_d, c, device.sm_count));
                  points.push_back(std::move(p));
                }
      }
    }
  if (points.empty()) return std::nullopt;
  std::vector<double> t(points.size(), kH100Baseline);
  for (const int root : kH100Roots)
    for (std::size_t i = 0; i < points.size(); ++i) t[i] += leaf(kH100Nodes, root, xs[i]);
  const auto at = std::min_element(t.begin(), t.end());  // the first of equal ones
  const double kept = cost_model_predict_h100(
      cost_model_features(s, data_d, config_of(rules), device.sm_count));
  if (kept - *at <= kCostModelMargin) return rules;
  return points[static_cast<std::size_t>(at - t.begin())];
}

}  // namespace ktune::decode
