// The CPU attention reference on cases small enough to work out by hand, and against a direct
// triple loop on random data: layouts, grouped heads, causal alignment, rows that see no key, and
// the mask variants (window edges, soft-capping, ALiBi slopes, and their combinations), and
// variable-length batches against each sequence run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "tests/support/attention_reference.hpp"

namespace ktune::test {
namespace {

/// A tensor of the given layout filled with uniform values in [-2, 2).
AttentionTensor random_tensor(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
                              bool bshd, std::mt19937& rng) {
  AttentionTensor t;
  attention_strides(b, h, s, d, bshd, t);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (double& x : t.data) x = u(rng);
  return t;
}

/// Zero-filled q [1, 1, nq, d], k and v [1, 1, nk, d] for hand-worked cases.
struct Qkv {
  AttentionTensor q, k, v;
  Qkv(std::int64_t nq, std::int64_t nk, std::int64_t d) {
    attention_strides(1, 1, nq, d, false, q);
    attention_strides(1, 1, nk, d, false, k);
    attention_strides(1, 1, nk, d, false, v);
  }
  AttentionResult run(const AttentionShape& s) const { return attention_ref(s, q, k, v); }
};

TEST(AttentionReference, SingleKeyReturnsItsValue) {
  AttentionShape s;
  s.d = 2;
  s.scale = 0.5;
  Qkv t(1, 1, 2);
  t.q.data = {1, 2};
  t.k.data = {3, -1};
  t.v.data = {0.25, -7};
  const AttentionResult r = t.run(s);
  EXPECT_DOUBLE_EQ(r.o[0], 0.25);
  EXPECT_DOUBLE_EQ(r.o[1], -7);
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5 * (3 - 2));  // log(exp(s)) = s
}

TEST(AttentionReference, EqualScoresAverageTheValues) {
  // q = 0: every score is 0, so o is the mean of v and lse = log(nk).
  AttentionShape s;
  s.nk = 3;
  s.d = 2;
  Qkv t(1, 3, 2);
  t.k.data = {1, 2, 3, 4, 5, 6};
  t.v.data = {1, 10, 2, 20, 6, 60};
  const AttentionResult r = t.run(s);
  EXPECT_NEAR(r.o[0], 3.0, 1e-15);
  EXPECT_NEAR(r.o[1], 30.0, 1e-13);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
}

TEST(AttentionReference, TwoKeysByHand) {
  // Scores 0 and log(3) (scale 1): weights 1/4 and 3/4; lse = log(1 + 3).
  AttentionShape s;
  s.nk = 2;
  s.d = 1;
  s.scale = 1.0;
  Qkv t(1, 2, 1);
  t.q.data = {1};
  t.k.data = {0, std::log(3.0)};
  t.v.data = {4, 8};
  const AttentionResult r = t.run(s);
  EXPECT_NEAR(r.o[0], 0.25 * 4 + 0.75 * 8, 1e-14);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-15);
}

TEST(AttentionReference, CausalIsAlignedBottomRight) {
  // nq = 2, nk = 3, q = 0: row 0 sees keys 0..1, row 1 sees keys 0..2.
  AttentionShape s;
  s.nq = 2;
  s.nk = 3;
  s.d = 1;
  s.causal = true;
  Qkv t(2, 3, 1);
  t.k.data = {5, 6, 7};
  t.v.data = {1, 2, 6};
  const AttentionResult r = t.run(s);
  EXPECT_NEAR(r.o[0], 1.5, 1e-15);
  EXPECT_NEAR(r.o[1], 3.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(3.0), 1e-15);

  // nq = 3, nk = 1: rows 0 and 1 see nothing (o = 0, lse = -inf), row 2 sees key 0.
  s.nq = 3;
  s.nk = 1;
  Qkv u(3, 1, 1);
  u.v.data = {9};
  const AttentionResult none = u.run(s);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(none.o[0], 0.0);
  EXPECT_EQ(none.o[1], 0.0);
  EXPECT_EQ(none.lse[0], neg_inf);
  EXPECT_EQ(none.lse[1], neg_inf);
  EXPECT_DOUBLE_EQ(none.o[2], 9.0);
  EXPECT_DOUBLE_EQ(none.lse[2], 0.0);
}

TEST(AttentionReference, GroupedHeadsShareKeysAndValues) {
  // hq = 4, hkv = 2: query heads 0, 1 read kv head 0; heads 2, 3 read kv head 1. One key each,
  // so o is that head's value.
  AttentionShape s;
  s.hq = 4;
  s.hkv = 2;
  s.d = 1;
  AttentionTensor q, k, v;
  attention_strides(1, 4, 1, 1, false, q);
  attention_strides(1, 2, 1, 1, false, k);
  attention_strides(1, 2, 1, 1, false, v);
  v.data = {-1, 5};
  const AttentionResult r = attention_ref(s, q, k, v);
  EXPECT_EQ(r.o, (std::vector<double>{-1, -1, 5, 5}));
}

TEST(AttentionReference, LayoutsAgreeAndMatchADirectLoop) {
  std::mt19937 rng(7);
  AttentionShape s;
  s.b = 2;
  s.hq = 6;
  s.hkv = 2;
  s.nq = 5;
  s.nk = 9;
  s.d = 8;
  for (bool causal : {false, true}) {
    s.causal = causal;
    const AttentionTensor q = random_tensor(s.b, s.hq, s.nq, s.d, false, rng);
    const AttentionTensor k = random_tensor(s.b, s.hkv, s.nk, s.d, false, rng);
    const AttentionTensor v = random_tensor(s.b, s.hkv, s.nk, s.d, false, rng);
    // The same values stored [B, S, H, D].
    AttentionTensor q2, k2, v2;
    attention_strides(s.b, s.hq, s.nq, s.d, true, q2);
    attention_strides(s.b, s.hkv, s.nk, s.d, true, k2);
    attention_strides(s.b, s.hkv, s.nk, s.d, true, v2);
    const auto copy = [](const AttentionTensor& from, AttentionTensor& to, std::int64_t b,
                         std::int64_t h, std::int64_t n, std::int64_t d) {
      for (std::int64_t x = 0; x < b; ++x)
        for (std::int64_t y = 0; y < h; ++y)
          for (std::int64_t z = 0; z < n; ++z)
            for (std::int64_t i = 0; i < d; ++i)
              to.data[static_cast<std::size_t>(x * to.batch + y * to.head + z * to.seq + i)] =
                  from.at(x, y, z, i);
    };
    copy(q, q2, s.b, s.hq, s.nq, s.d);
    copy(k, k2, s.b, s.hkv, s.nk, s.d);
    copy(v, v2, s.b, s.hkv, s.nk, s.d);
    const AttentionResult a = attention_ref(s, q, k, v);
    const AttentionResult b = attention_ref(s, q2, k2, v2);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.lse, b.lse);

    const double scale = 1.0 / std::sqrt(8.0);
    for (std::int64_t bb = 0; bb < s.b; ++bb)
      for (std::int64_t h = 0; h < s.hq; ++h)
        for (std::int64_t r = 0; r < s.nq; ++r) {
          const std::int64_t hk = h / 3, last = causal ? r + s.nk - s.nq : s.nk - 1;
          double sum = 0, acc[8] = {};
          for (std::int64_t j = 0; j <= last; ++j) {
            double dot = 0;
            for (std::int64_t i = 0; i < s.d; ++i) dot += q.at(bb, h, r, i) * k.at(bb, hk, j, i);
            const double p = std::exp(dot * scale);
            sum += p;
            for (std::int64_t i = 0; i < s.d; ++i) acc[i] += p * v.at(bb, hk, j, i);
          }
          EXPECT_NEAR(a.lse[static_cast<std::size_t>((bb * s.hq + h) * s.nq + r)], std::log(sum),
                      1e-12);
          for (std::int64_t i = 0; i < s.d; ++i)
            EXPECT_NEAR(a.o_at(s, bb, h, r, i), acc[i] / sum, 1e-12);
        }
  }
}

TEST(AttentionReference, WindowEdgesCausal) {
  // q = 0, causal, window 2: row i averages the values of keys i - 1 and i (only key 0 for row 0).
  AttentionShape s;
  s.nq = 4;
  s.nk = 4;
  s.d = 1;
  s.causal = true;
  s.window = 2;
  Qkv t(4, 4, 1);
  t.k.data = {1, 2, 3, 4};
  t.v.data = {1, 2, 4, 8};
  const AttentionResult r = t.run(s);
  EXPECT_EQ(r.o, (std::vector<double>{1, 1.5, 3, 6}));
  EXPECT_NEAR(r.lse[0], 0.0, 1e-15);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(r.lse[static_cast<std::size_t>(i)], std::log(2.0), 1e-15);
  // Window 1: each row sees its diagonal key only.
  s.window = 1;
  EXPECT_EQ(t.run(s).o, (std::vector<double>{1, 2, 4, 8}));
  // A window at least nk changes nothing.
  s.window = 4;
  const AttentionResult wide = t.run(s);
  s.window = 0;
  const AttentionResult none = t.run(s);
  EXPECT_EQ(wide.o, none.o);
  EXPECT_EQ(wide.lse, none.lse);
}

TEST(AttentionReference, WindowEdgesNonCausalAndBottomRight) {
  // nq = 2, nk = 4, not causal, window 2: row i (aligned i' = i + 2) sees keys j > i' - 2 and
  // every key right of i': row 0 keys 1..3, row 1 keys 2..3.
  AttentionShape s;
  s.nq = 2;
  s.nk = 4;
  s.d = 1;
  s.window = 2;
  Qkv t(2, 4, 1);
  t.v.data = {1, 2, 4, 8};
  const AttentionResult r = t.run(s);
  EXPECT_NEAR(r.o[0], 14.0 / 3, 1e-14);
  EXPECT_NEAR(r.o[1], 6.0, 1e-14);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
  // Causal as well: row 0 sees keys 1..2, row 1 keys 2..3.
  s.causal = true;
  const AttentionResult c = t.run(s);
  EXPECT_NEAR(c.o[0], 3.0, 1e-14);
  EXPECT_NEAR(c.o[1], 6.0, 1e-14);
  // nq > nk, causal and window 1: rows 0 and 1 see no key (o = 0, lse = -inf), row 2 key 0.
  s.nq = 3;
  s.nk = 1;
  s.window = 1;
  Qkv u(3, 1, 1);
  u.v.data = {9};
  const AttentionResult none = u.run(s);
  EXPECT_EQ(none.o, (std::vector<double>{0, 0, 9}));
  EXPECT_EQ(none.lse[1], -std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(none.lse[2], 0.0);
}

TEST(AttentionReference, SoftcapBoundsTheScores) {
  // One key: o is its value whatever the cap; lse is the capped score cap * tanh(s / cap).
  AttentionShape s;
  s.d = 1;
  s.scale = 1.0;
  s.softcap = 2.0;
  Qkv t(1, 1, 1);
  t.q.data = {3};
  t.k.data = {2};
  t.v.data = {-5};
  const AttentionResult r = t.run(s);
  EXPECT_DOUBLE_EQ(r.o[0], -5);
  EXPECT_NEAR(r.lse[0], 2.0 * std::tanh(6.0 / 2.0), 1e-15);
  // Two keys with scores 0 and 6, cap 2: weights 1 and e^{2 tanh 3}.
  s.nk = 2;
  Qkv u(1, 2, 1);
  u.q.data = {3};
  u.k.data = {0, 2};
  u.v.data = {1, 0};
  const double w = std::exp(2.0 * std::tanh(3.0));
  const AttentionResult c = u.run(s);
  EXPECT_NEAR(c.o[0], 1.0 / (1.0 + w), 1e-15);
  EXPECT_NEAR(c.lse[0], std::log(1.0 + w), 1e-14);
  // A large cap is (nearly) no cap.
  s.softcap = 1e6;
  EXPECT_NEAR(u.run(s).o[0], 1.0 / (1.0 + std::exp(6.0)), 1e-12);
}

TEST(AttentionReference, AlibiPenalisesDistanceFromTheAlignedRow) {
  // q = 0, nq = 1, nk = 3: the row sits at key 2; slope ln 2 gives weights 1/4, 1/2, 1.
  AttentionShape s;
  s.nk = 3;
  s.d = 1;
  s.alibi_slopes = {std::log(2.0)};
  Qkv t(1, 3, 1);
  t.v.data = {4, 2, 1};
  const AttentionResult r = t.run(s);
  EXPECT_NEAR(r.o[0], (1 + 1 + 1) / 1.75, 1e-14);
  EXPECT_NEAR(r.lse[0], std::log(1.75), 1e-15);
  // Not causal, nq = nk = 2: row 0 pays for the key to its right too (|j - i'|): weights 1, 1/2.
  s.nq = 2;
  s.nk = 2;
  Qkv u(2, 2, 1);
  u.v.data = {3, 6};
  const AttentionResult c = u.run(s);
  EXPECT_NEAR(c.o[0], (3 + 0.5 * 6) / 1.5, 1e-14);
  EXPECT_NEAR(c.o[1], (0.5 * 3 + 6) / 1.5, 1e-14);
  // Per head: hq = 2 with slopes 0 and ln 2 (kv shared).
  s.hq = 2;
  s.alibi_slopes = {0.0, std::log(2.0)};
  AttentionTensor q, k, v;
  attention_strides(1, 2, 2, 1, false, q);
  attention_strides(1, 1, 2, 1, false, k);
  attention_strides(1, 1, 2, 1, false, v);
  v.data = {3, 6};
  s.hkv = 1;
  const AttentionResult h = attention_ref(s, q, k, v);
  EXPECT_NEAR(h.o_at(s, 0, 0, 0, 0), 4.5, 1e-14);
  EXPECT_NEAR(h.o_at(s, 0, 1, 0, 0), 4.0, 1e-14);
}

TEST(AttentionReference, VariantsMatchADirectLoop) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> slope(0.0, 1.0);
  AttentionShape base;
  base.b = 1;
  base.hq = 4;
  base.hkv = 2;
  base.d = 8;
  for (auto [nq, nk] : {std::pair<std::int64_t, std::int64_t>{7, 13}, {13, 7}, {9, 9}})
    for (bool causal : {false, true})
      for (std::int64_t window : {0, 1, 3, 20})
        for (double cap : {0.0, 1.5})
          for (bool alibi : {false, true}) {
            AttentionShape s = base;
            s.nq = nq, s.nk = nk, s.causal = causal, s.window = window, s.softcap = cap;
            if (alibi)
              for (int h = 0; h < 4; ++h) s.alibi_slopes.push_back(slope(rng));
            const AttentionTensor q = random_tensor(1, 4, nq, 8, false, rng);
            const AttentionTensor k = random_tensor(1, 2, nk, 8, true, rng);
            const AttentionTensor v = random_tensor(1, 2, nk, 8, false, rng);
            const AttentionResult a = attention_ref(s, q, k, v);
            const double scale = 1.0 / std::sqrt(8.0);
            for (std::int64_t h = 0; h < 4; ++h)
              for (std::int64_t r = 0; r < nq; ++r) {
                const std::int64_t at = r + nk - nq;
                double sum = 0, acc[8] = {};
                for (std::int64_t j = 0; j < nk; ++j) {
                  if ((causal && j > at) || (window > 0 && j <= at - window)) continue;
                  double x = 0;
                  for (std::int64_t i = 0; i < 8; ++i) x += q.at(0, h, r, i) * k.at(0, h / 2, j, i);
                  x *= scale;
                  if (cap > 0) x = cap * std::tanh(x / cap);
                  if (alibi) x -= s.alibi_slopes[static_cast<std::size_t>(h)] *
                                  static_cast<double>(std::abs(j - at));
                  const double p = std::exp(x);
                  sum += p;
                  for (std::int64_t i = 0; i < 8; ++i) acc[i] += p * v.at(0, h / 2, j, i);
                }
                const std::size_t li = static_cast<std::size_t>(h * nq + r);
                if (sum == 0) {
                  EXPECT_EQ(a.lse[li], -std::numeric_limits<double>::infinity());
                  continue;
                }
                EXPECT_NEAR(a.lse[li], std::log(sum), 1e-12);
                for (std::int64_t i = 0; i < 8; ++i)
                  EXPECT_NEAR(a.o_at(s, 0, h, r, i), acc[i] / sum, 1e-12)
                      << nq << " " << nk << " " << causal << " " << window << " " << cap << " "
                      << alibi;
              }
          }
}

TEST(AttentionReference, VarlenIsEachSequenceAlone) {
  // Packed [total, h, d] rows (FlashAttention's varlen layout): sequences of 1, 0, 200, 77 and 5
  // queries against 300, 50, 200, 1 and 0 keys (none for the last: o = 0, lse = -inf).
  const std::vector<std::int64_t> cu_q = {0, 1, 1, 201, 278, 283};
  const std::vector<std::int64_t> cu_k = {0, 300, 350, 550, 551, 551};
  std::mt19937 rng(7);
  for (const char* variant : {"", "causal", "window", "alibi"}) {
    AttentionShape s;
    s.hq = 4, s.hkv = 2, s.d = 32;
    s.causal = variant == std::string("causal") || variant == std::string("window");
    if (variant == std::string("window")) s.window = 20;
    if (variant == std::string("alibi")) s.alibi_slopes = {0.1, 0.2, 0.3, 0.4};
    const AttentionTensor q = random_tensor(1, s.hq, cu_q.back(), s.d, true, rng);
    const AttentionTensor k = random_tensor(1, s.hkv, cu_k.back(), s.d, true, rng);
    const AttentionTensor v = random_tensor(1, s.hkv, cu_k.back(), s.d, true, rng);
    const AttentionResult r = attention_ref_varlen(s, cu_q, cu_k, q, k, v);
    const std::int64_t total = cu_q.back();
    ASSERT_EQ(r.o.size(), static_cast<std::size_t>(total * s.hq * s.d));
    ASSERT_EQ(r.lse.size(), static_cast<std::size_t>(s.hq * total));
    for (std::size_t i = 0; i + 1 < cu_q.size(); ++i) {
      AttentionShape one = s;
      one.nq = cu_q[i + 1] - cu_q[i];
      one.nk = cu_k[i + 1] - cu_k[i];
      if (one.nq == 0) continue;
      // The sequence alone, copied to its own [1, H, S, D] tensors (no keys: o = 0, lse = -inf).
      AttentionResult a;
      a.o.assign(static_cast<std::size_t>(s.hq * one.nq * s.d), 0.0);
      a.lse.assign(static_cast<std::size_t>(s.hq * one.nq),
                   -std::numeric_limits<double>::infinity());
      if (one.nk > 0) {
        Qkv alone(one.nq, one.nk, s.d);
        attention_strides(1, s.hq, one.nq, s.d, false, alone.q);
        attention_strides(1, s.hkv, one.nk, s.d, false, alone.k);
        attention_strides(1, s.hkv, one.nk, s.d, false, alone.v);
        for (std::int64_t h = 0; h < s.hq; ++h)
          for (std::int64_t j = 0; j < one.nq; ++j)
            for (std::int64_t e = 0; e < s.d; ++e)
              alone.q.data[static_cast<std::size_t>((h * one.nq + j) * s.d + e)] =
                  q.at(0, h, cu_q[i] + j, e);
        for (std::int64_t h = 0; h < s.hkv; ++h)
          for (std::int64_t j = 0; j < one.nk; ++j)
            for (std::int64_t e = 0; e < s.d; ++e) {
              const std::size_t at = static_cast<std::size_t>((h * one.nk + j) * s.d + e);
              alone.k.data[at] = k.at(0, h, cu_k[i] + j, e);
              alone.v.data[at] = v.at(0, h, cu_k[i] + j, e);
            }
        a = alone.run(one);
      }
      for (std::int64_t h = 0; h < s.hq; ++h)
        for (std::int64_t row = 0; row < one.nq; ++row) {
          const std::int64_t packed = cu_q[i] + row;
          const double lse = r.lse[static_cast<std::size_t>(h * total + packed)];
          const double want = a.lse[static_cast<std::size_t>(h * one.nq + row)];
          if (std::isinf(want)) {
            EXPECT_EQ(lse, want) << variant << " sequence " << i << " row " << row;
          } else {
            EXPECT_NEAR(lse, want, 1e-12) << variant << " sequence " << i << " row " << row;
          }
          for (std::int64_t e = 0; e < s.d; ++e)
            EXPECT_NEAR(r.o[static_cast<std::size_t>((packed * s.hq + h) * s.d + e)],
                        a.o_at(one, 0, h, row, e), 1e-12)
                << variant << " sequence " << i << " row " << row;
        }
    }
  }
}

}  // namespace
}  // namespace ktune::test
