#include "tests/support/moe_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ktune::test {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Indices of the n largest values, best first, ties to the lower index (stable sort).
std::vector<int> top(const std::vector<double>& v, int n) {
  std::vector<int> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a] > v[b]; });
  order.resize(static_cast<std::size_t>(n));
  return order;
}

/// Per-expert weight quantity before normalisation: exp(x) for softmax, sigmoid(x) otherwise.
std::vector<double> raw_scores(const float* row, const MoeRouteProblem& p) {
  std::vector<double> s(static_cast<std::size_t>(p.experts));
  if (p.routing == moe_sigmoid_group) {
    for (int e = 0; e < p.experts; ++e) s[e] = sigmoid(row[e]);
  } else {
    const double m = *std::max_element(row, row + p.experts);
    for (int e = 0; e < p.experts; ++e) s[e] = std::exp(static_cast<double>(row[e]) - m);
  }
  return s;
}

std::vector<double> weights_of(const std::vector<double>& raw, const MoeRouteProblem& p,
                               const std::vector<int>& ids) {
  double norm = 0.0;
  if (p.routing == moe_softmax) {
    for (double v : raw) norm += v;
  } else {
    for (int id : ids) norm += raw[id];
  }
  const double scale = p.routing == moe_sigmoid_group ? p.routed_scaling : 1.0;
  std::vector<double> w;
  for (int id : ids) w.push_back(raw[id] / norm * scale);
  return w;
}

}  // namespace

MoeRouteResult moe_route_ref(const std::vector<float>& logits, const std::vector<float>& bias,
                             const MoeRouteProblem& p) {
  const int E = p.experts;
  MoeRouteResult r;
  for (int t = 0; t < p.tokens; ++t) {
    const float* row = logits.data() + static_cast<std::size_t>(t) * E;
    const std::vector<double> raw = raw_scores(row, p);
    std::vector<double> select(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e) {
      select[e] = p.routing == moe_sigmoid_group
                      ? raw[e] + (bias.empty() ? 0.0 : static_cast<double>(bias[e]))
                      : static_cast<double>(row[e]);
    }
    if (p.routing == moe_sigmoid_group && p.n_group > 1) {
      const int gsize = E / p.n_group;
      std::vector<double> group_score(static_cast<std::size_t>(p.n_group));
      for (int g = 0; g < p.n_group; ++g) {
        std::vector<double> members(select.begin() + g * gsize, select.begin() + (g + 1) * gsize);
        std::sort(members.rbegin(), members.rend());
        group_score[g] = members[0] + (gsize >= 2 ? members[1] : 0.0);
      }
      std::vector<bool> keep(static_cast<std::size_t>(p.n_group), false);
      for (int g : top(group_score, p.topk_group)) keep[g] = true;
      for (int e = 0; e < E; ++e)
        if (!keep[e / gsize]) select[e] = kNegInf;
    }
    const std::vector<int> ids = top(select, p.k);
    const std::vector<double> w = weights_of(raw, p, ids);
    r.ids.insert(r.ids.end(), ids.begin(), ids.end());
    r.weights.insert(r.weights.end(), w.begin(), w.end());
    r.select.insert(r.select.end(), select.begin(), select.end());
    double sum = 0.0;
    for (double v : raw) sum += v;
    for (double v : raw) r.prob.push_back(v / sum);
  }
  return r;
}

std::vector<std::vector<int>> moe_route_group_alternatives(const std::vector<float>& logits,
                                                           const std::vector<float>& bias,
                                                           const MoeRouteProblem& p, int t,
                                                           double eps) {
  const int E = p.experts;
  const float* row = logits.data() + static_cast<std::size_t>(t) * E;
  const std::vector<double> raw = raw_scores(row, p);
  std::vector<double> select(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) select[e] = raw[e] + (bias.empty() ? 0.0 : static_cast<double>(bias[e]));
  const int gsize = E / p.n_group;
  std::vector<double> group_score(static_cast<std::size_t>(p.n_group));
  for (int g = 0; g < p.n_group; ++g) {
    std::vector<double> members(select.begin() + g * gsize, select.begin() + (g + 1) * gsize);
    std::sort(members.rbegin(), members.rend());
    group_score[g] = members[0] + (gsize >= 2 ? members[1] : 0.0);
  }
  const std::vector<int> order = top(group_score, p.n_group);
  const double boundary = group_score[order[static_cast<std::size_t>(p.topk_group - 1)]];
  std::vector<int> sure, open;
  for (int g = 0; g < p.n_group; ++g) {
    if (group_score[g] > boundary + eps) {
      sure.push_back(g);
    } else if (group_score[g] >= boundary - eps) {
      open.push_back(g);
    }
  }
  const int need = p.topk_group - static_cast<int>(sure.size());
  std::vector<std::vector<int>> out;
  // Every choice of `need` of the open groups (bitmasks; open groups are few).
  for (unsigned mask = 0; mask < (1u << open.size()); ++mask) {
    if (__builtin_popcount(mask) != need) continue;
    std::vector<bool> keep(static_cast<std::size_t>(p.n_group), false);
    for (int g : sure) keep[g] = true;
    for (std::size_t i = 0; i < open.size(); ++i)
      if ((mask >> i) & 1) keep[open[i]] = true;
    std::vector<double> masked = select;
    for (int e = 0; e < E; ++e)
      if (!keep[e / gsize]) masked[e] = kNegInf;
    out.push_back(top(masked, p.k));
  }
  return out;
}

std::vector<double> moe_route_weights_for(const std::vector<float>& logits, const MoeRouteProblem& p,
                                          int t, const std::vector<int>& ids) {
  return weights_of(raw_scores(logits.data() + static_cast<std::size_t>(t) * p.experts, p), p, ids);
}

double moe_aux_loss_ref(const MoeRouteResult& r, const MoeRouteProblem& p) {
  const int E = p.experts;
  std::vector<double> f(static_cast<std::size_t>(E), 0.0), P(static_cast<std::size_t>(E), 0.0);
  for (int id : r.ids)
    if (id >= 0 && id < E) f[id] += 1.0 / (static_cast<double>(p.tokens) * p.k);
  for (int t = 0; t < p.tokens; ++t)
    for (int e = 0; e < E; ++e) P[e] += r.prob[static_cast<std::size_t>(t) * E + e] / p.tokens;
  double loss = 0.0;
  for (int e = 0; e < E; ++e) loss += f[e] * P[e];
  return E * loss;
}

MoeExpertChoiceResult moe_expert_choice_ref(const std::vector<float>& logits, int tokens,
                                            int experts, int k) {
  const std::size_t T = static_cast<std::size_t>(tokens), E = static_cast<std::size_t>(experts);
  MoeExpertChoiceResult r;
  r.capacity = moe_expert_capacity(tokens, k, experts);
  r.scores.resize(T * E);
  for (std::size_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * E;
    const double m = *std::max_element(row, row + E);
    double sum = 0.0;
    for (std::size_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(row[e]) - m);
    for (std::size_t e = 0; e < E; ++e)
      r.scores[t * E + e] = std::exp(static_cast<double>(row[e]) - m) / sum;
  }
  for (std::size_t e = 0; e < E; ++e) {
    std::vector<double> column(T);
    for (std::size_t t = 0; t < T; ++t) column[t] = r.scores[t * E + e];
    std::vector<int> chosen = top(column, r.capacity);  // ties to the lower token id
    std::sort(chosen.begin(), chosen.end());
    for (int t : chosen) {
      r.tokens.push_back(t);
      r.weights.push_back(column[static_cast<std::size_t>(t)]);
    }
  }
  return r;
}

std::vector<MoeUse> moe_topk_uses(const std::vector<int>& ids, const std::vector<double>& weights,
                                  int k, int experts) {
  std::vector<MoeUse> uses;
  for (std::size_t p = 0; p < ids.size(); ++p)
    if (ids[p] >= 0 && ids[p] < experts)
      uses.push_back({static_cast<int>(p / static_cast<std::size_t>(k)), ids[p], weights[p]});
  return uses;
}

std::vector<MoeUse> moe_expert_choice_uses(const std::vector<int>& tokens,
                                           const std::vector<double>& weights, int experts,
                                           int capacity) {
  std::vector<MoeUse> uses;
  for (int e = 0; e < experts; ++e)
    for (int c = 0; c < capacity; ++c) {
      const std::size_t p = static_cast<std::size_t>(e) * capacity + c;
      uses.push_back({tokens[p], e, weights[p]});
    }
  // Per token in expert order (stable: each expert's entries are already in expert order).
  std::stable_sort(uses.begin(), uses.end(),
                   [](const MoeUse& a, const MoeUse& b) { return a.token < b.token; });
  return uses;
}

std::vector<double> moe_layer_ref(const std::vector<double>& x, const std::vector<double>& w1,
                                  const std::vector<double>& w2, int tokens, int hidden, int inter,
                                  const std::vector<MoeUse>& uses) {
  const std::size_t H = static_cast<std::size_t>(hidden), I = static_cast<std::size_t>(inter);
  std::vector<double> y(static_cast<std::size_t>(tokens) * H, 0.0), act(I);
  for (const MoeUse& u : uses) {
    const double* xt = &x[static_cast<std::size_t>(u.token) * H];
    const double* g1 = &w1[static_cast<std::size_t>(u.expert) * 2 * I * H];
    const double* g2 = &w2[static_cast<std::size_t>(u.expert) * H * I];
    for (std::size_t j = 0; j < I; ++j) {
      double g = 0, up = 0;
      for (std::size_t h = 0; h < H; ++h) {
        g += xt[h] * g1[j * H + h];
        up += xt[h] * g1[(I + j) * H + h];
      }
      act[j] = g / (1.0 + std::exp(-g)) * up;
    }
    for (std::size_t col = 0; col < H; ++col) {
      double acc = 0;
      for (std::size_t j = 0; j < I; ++j) acc += act[j] * g2[col * I + j];
      y[static_cast<std::size_t>(u.token) * H + col] += u.weight * acc;
    }
  }
  return y;
}

MoeAlignResult moe_align_ref(const std::vector<int>& ids, int experts, int block_m) {
  const long long pairs = static_cast<long long>(ids.size());
  MoeAlignResult r;
  r.sorted_pairs.assign(static_cast<std::size_t>(moe_max_padded(pairs, experts, block_m)),
                        static_cast<int>(pairs));
  r.block_expert.assign(static_cast<std::size_t>(moe_max_blocks(pairs, experts, block_m)), -1);
  r.expert_counts.assign(static_cast<std::size_t>(experts), 0);
  std::size_t row = 0;
  for (int e = 0; e < experts; ++e) {
    const std::size_t first = row;
    for (std::size_t p = 0; p < ids.size(); ++p)
      if (ids[p] == e) r.sorted_pairs[row++] = static_cast<int>(p);
    r.expert_counts[e] = static_cast<int>(row - first);
    row = first + (row - first + block_m - 1) / block_m * block_m;
    for (std::size_t b = first / block_m; b < row / block_m; ++b) r.block_expert[b] = e;
  }
  r.padded_rows = static_cast<int>(row);
  return r;
}

}  // namespace ktune::test
