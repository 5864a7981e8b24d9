// The typed C++ entry points: each packs its pointers and dimensions on the stack in the op's
// declared order and hands them to the planner.
#include <cstdint>

#include "ktune/ktune.hpp"
#include "runtime/dispatch/attention_args.hpp"
#include "runtime/dispatch/moe_args.hpp"
#include "runtime/dispatch/planner.hpp"

namespace ktune {
namespace {

std::uint64_t addr(const void* p) { return reinterpret_cast<std::uint64_t>(p); }

// An op's index in all_ops(), resolved on first use; the op names are part of the API.
#define KTUNE_OP_INDEX(name)                                           \
  [] {                                                                 \
    static const int index = Runtime::Impl::op_index(name);            \
    return index;                                                      \
  }()

}  // namespace

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Runtime::~Runtime() = default;

Runtime& Runtime::global() {
  // Never destroyed: plans hold CUDA modules, and the driver may be gone at static destruction.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

void Runtime::add_rmsnorm(const void* x, const void* residual, const void* weight, void* y, void* h,
                          std::int64_t m, std::int64_t n, DType dtype, float eps, Stream stream) {
  const std::int64_t dims[] = {m, n};
  const std::uint64_t t[] = {addr(x), addr(residual), addr(weight), addr(y), addr(h)};
  const double s[] = {eps};
  impl_->run(KTUNE_OP_INDEX("add_rmsnorm"), dtype, dims, 2, t, 5, s, 1, stream);
}

void Runtime::layernorm(const void* x, const void* residual, const void* weight, const void* bias,
                        void* y, void* h, std::int64_t m, std::int64_t n, DType dtype, float eps,
                        Stream stream) {
  const double s[] = {eps};
  if ((residual == nullptr) != (h == nullptr))
    throw InvalidArgument("layernorm: residual and h must both be set or both be null");
  if (residual) {
    const std::int64_t dims[] = {m, n, 1};
    const std::uint64_t t[] = {addr(x), addr(residual), addr(weight), addr(bias), addr(y), addr(h)};
    impl_->run(KTUNE_OP_INDEX("layernorm"), dtype, dims, 3, t, 6, s, 1, stream);
  } else {
    const std::int64_t dims[] = {m, n, 0};
    const std::uint64_t t[] = {addr(x), addr(weight), addr(bias), addr(y)};
    impl_->run(KTUNE_OP_INDEX("layernorm"), dtype, dims, 3, t, 4, s, 1, stream);
  }
}

void Runtime::bias_act(const void* x, const void* bias, void* y, std::int64_t m, std::int64_t n,
                       Activation act, DType dtype, Stream stream) {
  const int a = static_cast<int>(act);
  if (a < 0 || a > 3)
    throw InvalidArgument("bias_act: activation " + std::to_string(a) +
                          " is not one of gelu_tanh (0), gelu_erf (1), silu (2), relu (3)");
  const std::int64_t dims[] = {m, n, a};
  const std::uint64_t t[] = {addr(x), addr(bias), addr(y)};
  impl_->run(KTUNE_OP_INDEX("bias_act"), dtype, dims, 3, t, 3, nullptr, 0, stream);
}

void Runtime::swiglu(const void* x, void* y, std::int64_t m, std::int64_t n, DType dtype,
                     Stream stream) {
  const std::int64_t dims[] = {m, n};
  const std::uint64_t t[] = {addr(x), addr(y)};
  impl_->run(KTUNE_OP_INDEX("swiglu"), dtype, dims, 2, t, 2, nullptr, 0, stream);
}

void Runtime::softmax(const void* x, void* y, std::int64_t m, std::int64_t n, float scale,
                      DType dtype, Stream stream) {
  const std::int64_t dims[] = {m, n};
  const std::uint64_t t[] = {addr(x), addr(y)};
  const double s[] = {scale};
  impl_->run(KTUNE_OP_INDEX("softmax"), dtype, dims, 2, t, 2, s, 1, stream);
}

AttentionLayout AttentionLayout::bhsd(std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                                      std::int64_t nk, std::int64_t d) {
  AttentionLayout l;
  l.q = l.o = {hq * nq * d, nq * d, d};
  l.k = l.v = {hkv * nk * d, nk * d, d};
  return l;
}

AttentionLayout AttentionLayout::bshd(std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                                      std::int64_t nk, std::int64_t d) {
  AttentionLayout l;
  l.q = l.o = {nq * hq * d, d, hq * d};
  l.k = l.v = {nk * hkv * d, d, hkv * d};
  return l;
}

void Runtime::flash_attention(const void* q, const void* k, const void* v, void* o, float* lse,
                              std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t nq,
                              std::int64_t nk, std::int64_t d, bool causal, float scale,
                              DType dtype, Stream stream, const AttentionLayout* layout) {
  // The prefill op through the one packer Runtime::attention uses, so that this entry follows
  // the op's declared dims and tensors (it had gone stale when `varlen` was added).
  AttentionArgs a;
  a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse;
  a.b = b, a.hq = hq, a.hkv = hkv, a.nq = nq, a.nk = nk, a.d = d;
  a.causal = causal;
  a.scale = scale;
  a.layout = layout;
  a.dtype = dtype;
  a.impl = AttentionImpl::prefill;
  attention(a, stream);
}

void Runtime::attention(const AttentionArgs& args, Stream stream) {
  const AttentionCall c = pack_attention(args);
  impl_->run(c.op_index, args.dtype, c.dims.data(), c.ndims, c.tensors.data(), c.ntensors,
             c.scalars.data(), c.nscalars, stream, c.has_strides ? c.strides.data() : nullptr,
             c.workspace.given() ? &c.workspace : nullptr);
}

std::size_t Runtime::attention_workspace_size(const AttentionArgs& args) {
  const AttentionCall c = pack_attention(args, false);
  return impl_->workspace_size(c.op_index, args.dtype, c.dims.data(), c.ndims);
}

void Runtime::moe(const MoeArgs& args, Stream stream) {
  const MoeCall c = pack_moe(args);
  impl_->run(KTUNE_OP_INDEX("moe"), args.dtype, c.dims.data(), c.ndims, c.tensors.data(),
             c.ntensors, c.scalars.data(), c.nscalars, stream, nullptr,
             c.workspace.given() ? &c.workspace : nullptr);
}

std::size_t Runtime::moe_workspace_size(const MoeArgs& args) {
  const MoeCall c = pack_moe(args, false);
  return impl_->workspace_size(KTUNE_OP_INDEX("moe"), args.dtype, c.dims.data(), c.ndims);
}

void Runtime::run(std::string_view op, const std::vector<std::int64_t>& problem, DType dtype,
                  const std::vector<const void*>& tensors, const std::vector<double>& scalars,
                  Stream stream) {
  if (tensors.size() > kMaxTensors) throw InvalidArgument("too many tensors");
  std::uint64_t t[kMaxTensors];
  for (std::size_t i = 0; i < tensors.size(); ++i) t[i] = addr(tensors[i]);
  impl_->run(Impl::op_index(op), dtype, problem.data(), static_cast<int>(problem.size()), t,
             static_cast<int>(tensors.size()), scalars.data(), static_cast<int>(scalars.size()),
             stream);
}

MatchInfo Runtime::query(std::string_view op, std::string_view shape, DType dtype) {
  return impl_->query(op, shape, dtype);
}

RuntimeStatus Runtime::status() { return impl_->status(); }

void Runtime::reset() { impl_->reset(); }

void Runtime::configure(RuntimeOptions options) { impl_->configure(std::move(options)); }

}  // namespace ktune
