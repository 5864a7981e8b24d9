// Warm-start selection over best rows written here (no GPU): this device first, then other
// devices of its architecture, by the lookup's distance; never across an exact dim, a regime or
// the fallback radius; configurations invalid for the problem, unreadable rows, stale kernel code
// and the problem itself passed over.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "db/store.hpp"
#include "search/space.hpp"
#include "tests/support/test_env.hpp"
#include "tuner/warm_start.hpp"

namespace ktune {
namespace {

class WarmStart : public ::testing::Test {
 protected:
  const Op& norm = get_op("add_rmsnorm");
  DeviceInfo h100 = *device_for_arch("sm_90a");
  DeviceInfo other_h100 = test::other_sm90_device();
  DeviceInfo a100 = *device_for_arch("sm_80");

  Space space(const Op& op, const std::string& shape, const DeviceInfo& device) {
    return Space(op, op.parse_problem(shape), DType::bf16, device);
  }

  /// The valid point `pick` of `shape`'s space on the H100 (distinct picks, distinct configs).
  std::string config(const Op& op, const std::string& shape, std::size_t pick) {
    const std::vector<Params> valid = space(op, shape, h100).valid_points();
    return op.params_key(valid.at(pick));
  }

  BestRecord row(const DeviceInfo& device, const Op& op, const std::string& shape,
                 const std::string& params, double us = 10.0) {
    BestRecord b;
    b.device_key = device.key();
    b.device_name = device.name;
    b.arch = device.arch();
    b.op = std::string(op.name());
    b.dtype = DType::bf16;
    b.problem_key = op.problem_key(op.parse_problem(shape));
    b.params_key = params;
    b.template_hash = op.template_hash();
    b.median_us = us;
    return b;
  }

  static std::vector<std::string> sources(const std::vector<WarmStartPoint>& points) {
    std::vector<std::string> out;
    for (const WarmStartPoint& p : points) out.push_back(p.problem_key);
    return out;
  }
};

TEST_F(WarmStart, ThisDeviceFirstThenItsArchitectureEachByDistance) {
  const Space asked = space(norm, "m=16384,n=4096", h100);
  const std::vector<BestRecord> rows = {
      row(h100, norm, "m=8192,n=8192", config(norm, "m=8192,n=8192", 3)),    // ln2 * sqrt(2)
      row(other_h100, norm, "m=16384,n=4096", config(norm, "m=16384,n=4096", 4)),  // 0
      row(h100, norm, "m=8192,n=4096", config(norm, "m=8192,n=4096", 1)),    // ln 2
      row(a100, norm, "m=16384,n=4096", config(norm, "m=16384,n=4096", 5)),  // another arch
      row(h100, norm, "m=32768,n=8192", config(norm, "m=32768,n=8192", 2)),  // ln2 * sqrt(2)
      row(h100, norm, "m=1024,n=4096", config(norm, "m=1024,n=4096", 6)),    // ln 16: too far
  };
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) ASSERT_NE(rows[i].params_key, rows[j].params_key);
  const std::vector<WarmStartPoint> got = select_warm_start(asked, norm.template_hash(), rows, 10);
  ASSERT_EQ(got.size(), 4u);
  // m=32768,n=8192 and m=8192,n=8192 are as far: the problem key decides.
  EXPECT_EQ(sources(got), (std::vector<std::string>{"m=8192,n=4096", "m=32768,n=8192",
                                                    "m=8192,n=8192", "m=16384,n=4096"}));
  EXPECT_TRUE(got[0].same_device && got[1].same_device && got[2].same_device);
  EXPECT_FALSE(got[3].same_device) << "the same problem on another device comes after this one's";
  EXPECT_EQ(got[3].device_key, other_h100.key());
  EXPECT_NEAR(got[0].distance, std::log(2.0), 1e-12);
  EXPECT_NEAR(got[1].distance, std::log(2.0) * std::sqrt(2.0), 1e-12);
  EXPECT_EQ(got[3].distance, 0.0);
  EXPECT_EQ(got[0].params_key, rows[2].params_key);
  EXPECT_EQ(got[0].params, norm.parse_params(rows[2].params_key));
  EXPECT_EQ(got[0].tuned_us, 10.0);
  // At most `count`, the nearest first.
  const std::vector<WarmStartPoint> two = select_warm_start(asked, norm.template_hash(), rows, 2);
  EXPECT_EQ(sources(two), (std::vector<std::string>{"m=8192,n=4096", "m=32768,n=8192"}));
  EXPECT_TRUE(select_warm_start(asked, norm.template_hash(), rows, 0).empty());
}

TEST_F(WarmStart, NeverAcrossAnExactDimARegimeOrTheRadius) {
  const Op& ln = get_op("layernorm");
  const Space asked = space(ln, "m=16384,n=4096,residual=no", h100);
  const std::vector<BestRecord> ln_rows = {
      row(h100, ln, "m=16384,n=4096,residual=yes", config(ln, "m=16384,n=4096,residual=yes", 1)),
      row(h100, ln, "m=16384,n=2048,residual=no", config(ln, "m=16384,n=2048,residual=no", 2)),
  };
  EXPECT_EQ(sources(select_warm_start(asked, ln.template_hash(), ln_rows)),
            (std::vector<std::string>{"m=16384,n=2048,residual=no"}));

  // Attention: head dim and causal are exact; decode (nq <= 16) never from prefill.
  const Op& fa = get_op("flash_attention");
  const std::string want = "b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=no";
  const Space fa_asked = space(fa, want, h100);
  const auto fa_row = [&](const std::string& shape) {
    return row(h100, fa, shape, config(fa, shape, 0));
  };
  const std::vector<BestRecord> fa_rows = {
      fa_row("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=64,causal=no"),
      fa_row("b=2,hq=16,hkv=16,nq=4096,nk=4096,d=128,causal=yes"),
      fa_row("b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=no"),
  };
  EXPECT_EQ(sources(select_warm_start(fa_asked, fa.template_hash(), fa_rows)),
            (std::vector<std::string>{"b=1,hq=16,hkv=16,nq=8192,nk=8192,d=128,causal=no"}));
  const Space decode = space(fa, "b=8,hq=32,hkv=8,nq=8,nk=4096,d=128", h100);
  const std::vector<BestRecord> decode_rows = {
      fa_row("b=8,hq=32,hkv=8,nq=17,nk=4096,d=128"),  // 1.06x away, but prefill
      fa_row("b=8,hq=32,hkv=8,nq=16,nk=4096,d=128"),
  };
  EXPECT_EQ(sources(select_warm_start(decode, fa.template_hash(), decode_rows)),
            (std::vector<std::string>{fa.problem_key(fa.parse_problem("b=8,hq=32,hkv=8,nq=16,nk=4096,d=128"))}));
}

TEST_F(WarmStart, PassesOverInvalidConfigsUnreadableRowsStaleCodeAndItself) {
  // Asked at n=4095: a configuration tuned at n=4096 whose vector width cannot divide it.
  const Space asked = space(norm, "m=4096,n=4095", h100);
  std::string misfit, fits;
  for (const Params& p : space(norm, "m=4096,n=4096", h100).valid_points()) {
    if (misfit.empty() && asked.check(p)) misfit = norm.params_key(p);
    if (fits.empty() && !asked.check(p)) fits = norm.params_key(p);
  }
  ASSERT_FALSE(misfit.empty());
  ASSERT_FALSE(fits.empty());
  BestRecord stale = row(h100, norm, "m=4096,n=4097", fits);
  stale.template_hash = "0000stale";
  BestRecord nan = row(h100, norm, "m=4096,n=4097", fits, std::nan(""));
  BestRecord hostile = row(h100, norm, "m=4096,n=4097", "threads=7,rows=1,vec=1,regs=0");
  BestRecord garbage = row(h100, norm, "m=4096,n=4097", fits);
  garbage.problem_key = "m=banana";
  BestRecord other_op = row(h100, get_op("softmax"), "m=4096,n=4096", fits);
  BestRecord other_dtype = row(h100, norm, "m=4096,n=4096", fits);
  other_dtype.dtype = DType::f16;
  const std::vector<BestRecord> rows = {
      row(h100, norm, "m=4096,n=4096", misfit),  // nearest, but does not fit n=4095
      row(h100, norm, "m=4096,n=4095", fits),    // the problem itself on this device
      stale, nan, hostile, garbage, other_op, other_dtype,
      row(h100, norm, "m=2048,n=4096", fits),    // the only usable row
      row(other_h100, norm, "m=2048,n=4096", fits),  // the same config again: taken once
  };
  const std::vector<WarmStartPoint> got = select_warm_start(asked, norm.template_hash(), rows);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].problem_key, "m=2048,n=4096");
  EXPECT_EQ(got[0].params_key, fits);
  EXPECT_TRUE(got[0].same_device);
  for (const WarmStartPoint& p : got) EXPECT_FALSE(asked.check(p.params));
}

// The same selection through a database, as a sweep reads it.
TEST_F(WarmStart, ReadsTheBestRowsOfTheStore) {
  test::TempDir dir;
  const std::filesystem::path path = dir.path() / "w.db";
  {
    Store s = Store::open(path, Store::Mode::read_write);
    for (const DeviceInfo* d : {&h100, &other_h100, &a100}) s.upsert_device(*d);
    for (const BestRecord& b :
         {row(h100, norm, "m=8192,n=4096", "threads=256,rows=1,vec=8,regs=1"),
          row(other_h100, norm, "m=16384,n=2048", "threads=128,rows=1,vec=4,regs=0"),
          row(a100, norm, "m=16384,n=4096", "threads=512,rows=1,vec=8,regs=0"),
          row(h100, norm, "m=16384,n=4096", "threads=1024,rows=1,vec=4,regs=0")})
      s.set_best(b);
  }
  Store store = Store::open(path, Store::Mode::read_only);
  const Space asked = space(norm, "m=16384,n=4096", h100);
  std::vector<RowIssue> skipped;
  const std::vector<WarmStartPoint> got = warm_start_points(store, asked, kWarmStartCount, &skipped);
  EXPECT_TRUE(skipped.empty());
  EXPECT_EQ(sources(got), (std::vector<std::string>{"m=8192,n=4096", "m=16384,n=2048"}));
  EXPECT_EQ(got.at(1).device_key, other_h100.key());
  EXPECT_EQ(got.at(1).params_key, "threads=128,rows=1,vec=4,regs=0");
  EXPECT_TRUE(warm_start_points(store, asked, 0).empty());
}

}  // namespace
}  // namespace ktune
