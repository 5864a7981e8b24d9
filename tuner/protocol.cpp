#include "tuner/protocol.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ktune/error.hpp"

namespace ktune {

Encoder& Encoder::u64(std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  buf_.append(b, 8);
  return *this;
}

Encoder& Encoder::f64(double v) {
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  return u64(u);
}

Encoder& Encoder::str(const std::string& s) {
  u64(s.size());
  buf_.append(s);
  return *this;
}

std::uint64_t Decoder::u64() {
  if (buf_.size() - pos_ < 8) throw Error("worker protocol: truncated message");
  std::uint64_t v;
  std::memcpy(&v, buf_.data() + pos_, 8);
  pos_ += 8;
  return v;
}

double Decoder::f64() {
  std::uint64_t u = u64();
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}

std::string Decoder::str() {
  std::uint64_t n = u64();
  if (buf_.size() - pos_ < n) throw Error("worker protocol: truncated string");
  std::string s = buf_.substr(pos_, n);
  pos_ += n;
  return s;
}

void encode(Encoder& e, const DeviceInfo& d) {
  e.str(d.name).i64(d.cc_major).i64(d.cc_minor).i64(d.sm_count).i64(d.memory_bytes);
  e.i64(d.l2_bytes).i64(d.smem_optin_per_block).i64(d.smem_per_sm).i64(d.regs_per_block);
  e.i64(d.regs_per_sm).i64(d.max_threads_per_block).i64(d.max_threads_per_sm);
  e.i64(d.driver_version).i64(d.nvrtc_version).i64(d.memory_bandwidth);
}

DeviceInfo decode_device(Decoder& d) {
  DeviceInfo v;
  v.name = d.str();
  v.cc_major = static_cast<int>(d.i64());
  v.cc_minor = static_cast<int>(d.i64());
  v.sm_count = static_cast<int>(d.i64());
  v.memory_bytes = d.i64();
  v.l2_bytes = d.i64();
  v.smem_optin_per_block = static_cast<int>(d.i64());
  v.smem_per_sm = static_cast<int>(d.i64());
  v.regs_per_block = static_cast<int>(d.i64());
  v.regs_per_sm = static_cast<int>(d.i64());
  v.max_threads_per_block = static_cast<int>(d.i64());
  v.max_threads_per_sm = static_cast<int>(d.i64());
  v.driver_version = static_cast<int>(d.i64());
  v.nvrtc_version = static_cast<int>(d.i64());
  v.memory_bandwidth = d.i64();
  return v;
}

void encode(Encoder& e, const WireKernel& k) {
  e.str(k.cubin).str(k.lowered_name).u64(k.dynamic_shared);
}

WireKernel decode_kernel(Decoder& d) {
  WireKernel k;
  k.cubin = d.str();
  k.lowered_name = d.str();
  k.dynamic_shared = static_cast<unsigned>(d.u64());
  return k;
}

void encode(Encoder& e, const ProblemRequest& r) {
  e.str(r.op).i64(static_cast<int>(r.dtype)).str(r.problem_key).u64(r.seed);
  e.u64(r.reference.size());
  for (const WireKernel& k : r.reference) encode(e, k);
  e.u64(r.checks.size());
  for (const WireKernel& k : r.checks) encode(e, k);
}

ProblemRequest decode_problem(Decoder& d) {
  ProblemRequest r;
  r.op = d.str();
  r.dtype = static_cast<DType>(d.i64());
  r.problem_key = d.str();
  r.seed = d.u64();
  std::uint64_t n = d.u64();
  for (std::uint64_t i = 0; i < n; ++i) r.reference.push_back(decode_kernel(d));
  n = d.u64();
  if (n != kCheckKernels) throw Error("worker protocol: " + std::to_string(n) +
                                      " verification kernels, expected " +
                                      std::to_string(static_cast<int>(kCheckKernels)));
  for (std::uint64_t i = 0; i < n; ++i) r.checks.push_back(decode_kernel(d));
  return r;
}

void encode(Encoder& e, const TimingSettings& t) {
  e.i64(t.warmup).i64(t.min_reps).i64(t.max_reps).f64(t.min_seconds).u64(t.flush_l2 ? 1 : 0);
  e.f64(t.warmup_seconds);
}

TimingSettings decode_timing(Decoder& d) {
  TimingSettings t;
  t.warmup = static_cast<int>(d.i64());
  t.min_reps = static_cast<int>(d.i64());
  t.max_reps = static_cast<int>(d.i64());
  t.min_seconds = d.f64();
  t.flush_l2 = d.u64() != 0;
  t.warmup_seconds = d.f64();
  return t;
}

void encode(Encoder& e, const EvaluateRequest& r) {
  e.str(r.params_key).u64(r.kernels.size());
  for (const WireKernel& k : r.kernels) encode(e, k);
  encode(e, r.timing);
}

EvaluateRequest decode_evaluate(Decoder& d) {
  EvaluateRequest r;
  r.params_key = d.str();
  std::uint64_t n = d.u64();
  for (std::uint64_t i = 0; i < n; ++i) r.kernels.push_back(decode_kernel(d));
  r.timing = decode_timing(d);
  return r;
}

void encode(Encoder& e, const Evaluation& v) {
  e.u64(static_cast<std::uint64_t>(v.status)).str(v.detail).u64(v.worker_exits ? 1 : 0);
  e.f64(v.median_us).f64(v.min_us).f64(v.max_us).f64(v.p10_us).f64(v.p90_us).i64(v.repetitions);
}

Evaluation decode_evaluation(Decoder& d) {
  Evaluation v;
  v.status = static_cast<EvalStatus>(d.u64());
  v.detail = d.str();
  v.worker_exits = d.u64() != 0;
  v.median_us = d.f64();
  v.min_us = d.f64();
  v.max_us = d.f64();
  v.p10_us = d.f64();
  v.p90_us = d.f64();
  v.repetitions = static_cast<int>(d.i64());
  return v;
}

namespace {

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("worker pipe closed: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Returns bytes read before EOF.
std::size_t read_all(int fd, char* p, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("worker pipe read failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

void write_frame(int fd, MessageType type, const std::string& payload) {
  char header[12];
  std::uint32_t t = static_cast<std::uint32_t>(type);
  std::uint64_t n = payload.size();
  std::memcpy(header, &t, 4);
  std::memcpy(header + 4, &n, 8);
  write_all(fd, header, sizeof header);
  write_all(fd, payload.data(), payload.size());
}

bool read_frame(int fd, MessageType& type, std::string& payload) {
  char header[12];
  std::size_t got = read_all(fd, header, sizeof header);
  if (got == 0) return false;
  if (got < sizeof header) throw Error("worker protocol: truncated frame header");
  std::uint32_t t;
  std::uint64_t n;
  std::memcpy(&t, header, 4);
  std::memcpy(&n, header + 4, 8);
  if (n > (std::uint64_t{1} << 32)) throw Error("worker protocol: frame too large");
  payload.resize(n);
  if (read_all(fd, payload.data(), n) < n) throw Error("worker protocol: truncated frame");
  type = static_cast<MessageType>(t);
  return true;
}

}  // namespace ktune
