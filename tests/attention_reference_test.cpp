// The CPU attention reference on cases small enough to work out by hand, and against a direct
// triple loop on random data: layouts, grouped heads, causal alignment, rows that see no key.
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace ktune::test
