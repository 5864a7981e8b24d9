// Messages between the tuner (parent: compiles, orchestrates, owns the database) and its
// benchmark worker process (owns the CUDA context). Frames on a pipe: u32 type, u64 length,
// payload. A worker crash or hang costs one candidate, never the sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/types.hpp"

namespace ktune {

enum class MessageType : std::uint32_t {
  hello = 1,         // -> DeviceInfo
  measure_copy = 2,  // -> copy bandwidth
  set_problem = 3,   // -> ok
  evaluate = 4,      // -> Evaluation
  shutdown = 5,
  compile = 6,       // one compile job to `ktune __compile` -> the kernel or the compile error
  reply_ok = 100,
  reply_error = 101,
};

/// Append-only binary encoder.
class Encoder {
 public:
  Encoder& u64(std::uint64_t v);
  Encoder& i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
  Encoder& f64(double v);
  Encoder& str(const std::string& s);
  const std::string& bytes() const { return buf_; }

 private:
  std::string buf_;
};

/// Decoder over a payload; throws ktune::Error on truncated input.
class Decoder {
 public:
  explicit Decoder(const std::string& bytes) : buf_(bytes) {}
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  double f64();
  std::string str();

 private:
  const std::string& buf_;
  std::size_t pos_ = 0;
};

/// A kernel as sent to the worker: its CUBIN and the name to look up.
struct WireKernel {
  std::string cubin;
  std::string lowered_name;
  unsigned dynamic_shared = 0;
};

struct ProblemRequest {
  std::string op;
  DType dtype = DType::bf16;
  std::string problem_key;
  std::uint64_t seed = 0;
  std::vector<WireKernel> reference;  // Op::reference_kernels
  std::vector<WireKernel> checks;     // common/check.cuh kernels, indexed by CheckKernel
};

/// The verification kernels of ProblemRequest::checks, in this order: fill and compare for the
/// op's dtype, for fp32 tensors (router logits, log-sum-exp), ids fill and int compare, then the
/// int32 fills of a permutation (block tables) and of a range (sequence lengths), and the bf16
/// fill of inputs that stay bf16 under an e4m3 op (the MoE layer's x).
enum CheckKernel : std::size_t {
  kFill, kCompare, kFillF32, kCompareF32, kFillIds, kCompareI32, kFillPermutation,
  kFillUniformInt, kFillBf16, kCheckKernels
};

struct TimingSettings {
  int warmup = 3;
  int min_reps = 20;
  int max_reps = 2000;
  double min_seconds = 0.05;   // keep repeating until this much kernel time is measured
  bool flush_l2 = false;       // overwrite a 2x-L2 buffer before every repetition
  double warmup_seconds = 0;   // after the `warmup` runs, run on for this much wall time
};

struct EvaluateRequest {
  std::string params_key;
  std::vector<WireKernel> kernels;
  TimingSettings timing;
};

enum class EvalStatus : std::uint64_t { ok = 0, launch_error = 1, wrong_result = 2 };

struct Evaluation {
  EvalStatus status = EvalStatus::ok;
  std::string detail;
  bool worker_exits = false;  // the CUDA context is unusable: the worker quits after replying
  double median_us = 0, min_us = 0, max_us = 0, p10_us = 0, p90_us = 0;
  int repetitions = 0;
};

void encode(Encoder& e, const DeviceInfo& d);
DeviceInfo decode_device(Decoder& d);
void encode(Encoder& e, const WireKernel& k);
WireKernel decode_kernel(Decoder& d);
void encode(Encoder& e, const ProblemRequest& r);
ProblemRequest decode_problem(Decoder& d);
void encode(Encoder& e, const TimingSettings& t);
TimingSettings decode_timing(Decoder& d);
void encode(Encoder& e, const EvaluateRequest& r);
EvaluateRequest decode_evaluate(Decoder& d);
void encode(Encoder& e, const Evaluation& v);
Evaluation decode_evaluation(Decoder& d);

/// Writes one frame; throws ktune::Error when the pipe is closed.
void write_frame(int fd, MessageType type, const std::string& payload);
/// Reads one frame; false on a clean EOF before the frame; throws on a truncated frame.
bool read_frame(int fd, MessageType& type, std::string& payload);

/// The worker's main loop: serves requests on `in_fd`, replies on `out_fd`, until shutdown or
/// EOF. Returns the process exit code.
int worker_main(int in_fd, int out_fd);

}  // namespace ktune
