// The tuner's worker protocol without a GPU: what the parent asks survives the pipe's encoding,
// and a cut payload is refused, not half read.
#include "tuner/protocol.hpp"

#include <gtest/gtest.h>

#include "ktune/error.hpp"

using namespace ktune;

namespace {

EvaluateRequest request() {
  EvaluateRequest r;
  r.params_key = "block_m=128,bn1=128";
  r.kernels.push_back(WireKernel{std::string("\x7f" "ELF\0\x01", 6), "_Z6kernelv", 49152});
  r.timing.warmup = 5;
  r.timing.min_reps = 30;
  r.timing.max_reps = 900;
  r.timing.min_seconds = 0.1;
  r.timing.flush_l2 = true;
  r.timing.warmup_seconds = 0.3;
  return r;
}

TEST(Protocol, AnEvaluateRequestRoundTripsWithItsTimedWarmUp) {
  Encoder e;
  encode(e, request());
  Decoder d(e.bytes());
  const EvaluateRequest back = decode_evaluate(d);
  const EvaluateRequest want = request();
  EXPECT_EQ(back.params_key, want.params_key);
  ASSERT_EQ(back.kernels.size(), 1u);
  EXPECT_EQ(back.kernels[0].cubin, want.kernels[0].cubin);
  EXPECT_EQ(back.kernels[0].lowered_name, want.kernels[0].lowered_name);
  EXPECT_EQ(back.kernels[0].dynamic_shared, 49152u);
  EXPECT_EQ(back.timing.warmup, 5);
  EXPECT_EQ(back.timing.min_reps, 30);
  EXPECT_EQ(back.timing.max_reps, 900);
  EXPECT_DOUBLE_EQ(back.timing.min_seconds, 0.1);
  EXPECT_TRUE(back.timing.flush_l2);
  EXPECT_DOUBLE_EQ(back.timing.warmup_seconds, 0.3);
}

TEST(Protocol, TimingDefaultsToNoTimedWarmUp) {
  Encoder e;
  encode(e, TimingSettings{});
  Decoder d(e.bytes());
  EXPECT_EQ(decode_timing(d).warmup_seconds, 0.0);
}

TEST(Protocol, ACutRequestIsRefused) {
  Encoder e;
  encode(e, request());
  const std::string cut = e.bytes().substr(0, e.bytes().size() - 4);  // inside warmup_seconds
  Decoder d(cut);
  EXPECT_THROW(decode_evaluate(d), Error);
}

}  // namespace
