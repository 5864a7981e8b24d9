#include "tests/support/attention_reference.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>
#include <vector>

namespace ktune::test {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Rows [row0, row0 + rows) of head (b, h) of `t` as a dense matrix.
Matrix gather(const AttentionTensor& t, std::int64_t b, std::int64_t h, std::int64_t row0,
              std::int64_t rows, std::int64_t d) {
  Matrix m(rows, d);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < d; ++i) m(r, i) = t.at(b, h, row0 + r, i);
  return m;
}

}  // namespace

void attention_strides(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool bshd,
                       AttentionTensor& t) {
  t.batch = h * s * d;
  t.head = bshd ? d : s * d;
  t.seq = bshd ? h * d : d;
  t.data.assign(static_cast<std::size_t>(b * h * s * d), 0.0);
}

AttentionResult attention_ref(const AttentionShape& s, const AttentionTensor& q,
                              const AttentionTensor& k, const AttentionTensor& v) {
  const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.d));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  AttentionResult out;
  out.o.assign(static_cast<std::size_t>(s.b * s.hq * s.nq * s.d), 0.0);
  out.lse.assign(static_cast<std::size_t>(s.b * s.hq * s.nq), neg_inf);
  // Query rows in blocks: the score block stays small however long the sequences are. One task
  // per (batch, KV head): K and V are gathered once for the query heads that share them, and the
  // tasks (disjoint outputs) run on the machine's cores.
  constexpr std::int64_t kRows = 256;
  const std::int64_t group = s.hq / s.hkv;
  auto task = [&](std::int64_t b, std::int64_t hk) {
    const Matrix kh = gather(k, b, hk, 0, s.nk, s.d);
    const Matrix vh = gather(v, b, hk, 0, s.nk, s.d);
    for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h)
      for (std::int64_t r0 = 0; r0 < s.nq; r0 += kRows) {
        const std::int64_t rows = std::min(kRows, s.nq - r0);
        Matrix scores = gather(q, b, h, r0, rows, s.d) * kh.transpose() * scale;
        if (s.softcap > 0) scores = (scores.array() / s.softcap).tanh() * s.softcap;
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t row = r0 + r;
          const std::int64_t aligned = row + s.nk - s.nq;  // the row's position among the keys
          // Keys [first, seen) are visible to this row.
          const std::int64_t seen =
              s.causal ? std::clamp<std::int64_t>(aligned + 1, 0, s.nk) : s.nk;
          const std::int64_t first =
              s.window > 0 ? std::clamp<std::int64_t>(aligned - s.window + 1, 0, seen) : 0;
          const std::size_t lse_index = static_cast<std::size_t>((b * s.hq + h) * s.nq + row);
          double* o = &out.o[lse_index * static_cast<std::size_t>(s.d)];
          if (seen == first) continue;  // o = 0, lse = -inf
          Eigen::RowVectorXd visible = scores.row(r).segment(first, seen - first);
          if (!s.alibi_slopes.empty())
            for (std::int64_t j = first; j < seen; ++j)
              visible(j - first) -= s.alibi_slopes[static_cast<std::size_t>(h)] *
                                    static_cast<double>(std::abs(j - aligned));
          const double max = visible.maxCoeff();
          const Eigen::RowVectorXd p = (visible.array() - max).exp().matrix();
          const double sum = p.sum();
          const Eigen::RowVectorXd orow = p * vh.middleRows(first, seen - first) / sum;
          for (std::int64_t i = 0; i < s.d; ++i) o[i] = orow(i);
          out.lse[lse_index] = max + std::log(sum);
        }
      }
  };
  const std::int64_t tasks = s.b * s.hkv;
  const std::int64_t cores = std::max<std::int64_t>(std::thread::hardware_concurrency(), 1);
  const std::int64_t workers = std::clamp<std::int64_t>(tasks, 1, cores);
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t i = next++; i < tasks; i = next++) task(i / s.hkv, i % s.hkv);
  };
  std::vector<std::thread> pool;
  for (std::int64_t w = 1; w < workers; ++w) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return out;
}

AttentionResult attention_ref_varlen(const AttentionShape& s, const std::vector<std::int64_t>& cu_q,
                                     const std::vector<std::int64_t>& cu_k,
                                     const AttentionTensor& q, const AttentionTensor& k,
                                     const AttentionTensor& v) {
  const std::int64_t total_q = cu_q.back();
  AttentionResult out;
  out.o.assign(static_cast<std::size_t>(total_q * s.hq * s.d), 0.0);
  out.lse.assign(static_cast<std::size_t>(s.hq * total_q),
                 -std::numeric_limits<double>::infinity());
  // One sequence's rows as a tensor of batch 1 (a copy of the elements they span).
  const auto slice = [&](const AttentionTensor& t, std::int64_t row0, std::int64_t rows,
                         std::int64_t heads) {
    AttentionTensor r;
    r.head = t.head;
    r.seq = t.seq;
    const std::int64_t begin = row0 * t.seq;
    const std::int64_t end = begin + (rows - 1) * t.seq + (heads - 1) * t.head + s.d;
    r.data.assign(t.data.begin() + begin, t.data.begin() + end);
    return r;
  };
  for (std::size_t i = 0; i + 1 < cu_q.size(); ++i) {
    AttentionShape one = s;
    one.b = 1;
    one.nq = cu_q[i + 1] - cu_q[i];
    one.nk = cu_k[i + 1] - cu_k[i];
    if (one.nq == 0 || one.nk == 0) continue;  // nothing, or o = 0 and lse = -inf
    const AttentionResult r =
        attention_ref(one, slice(q, cu_q[i], one.nq, s.hq), slice(k, cu_k[i], one.nk, s.hkv),
                      slice(v, cu_k[i], one.nk, s.hkv));
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t row = 0; row < one.nq; ++row) {
        const std::int64_t packed = cu_q[i] + row;
        for (std::int64_t e = 0; e < s.d; ++e)
          out.o[static_cast<std::size_t>((packed * s.hq + h) * s.d + e)] = r.o_at(one, 0, h, row, e);
        out.lse[static_cast<std::size_t>(h * total_q + packed)] =
            r.lse[static_cast<std::size_t>(h * one.nq + row)];
      }
  }
  return out;
}

}  // namespace ktune::test
