// MoeArgs checked on the host and packed in the moe op's order. The op description
// (templates/moe) decides everything here: the order of its dims, tensors and scalars, its
// routing modes and which tensors each needs, the problem's constraints and their messages. A
// routing mode the op gains needs nothing here; a dim, tensor or scalar needs its MoeArgs field
// and one line in the tables below.
#include "runtime/dispatch/moe_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ktune/error.hpp"
#include "templates/op.hpp"

namespace ktune {
namespace {

/// A MoeArgs field, under the op's name for it.
template <typename T>
struct Field {
  const char* name;
  T (*get)(const MoeArgs&);
};

#define KTUNE_MOE_DIM(f) \
  { #f, [](const MoeArgs& a) { return static_cast<std::int64_t>(a.f); } }
#define KTUNE_MOE_TENSOR(f) \
  { #f, [](const MoeArgs& a) { return reinterpret_cast<std::uint64_t>(a.f); } }

const Field<std::int64_t> kDims[] = {
    KTUNE_MOE_DIM(e), KTUNE_MOE_DIM(k),       KTUNE_MOE_DIM(h),       KTUNE_MOE_DIM(i),
    KTUNE_MOE_DIM(t), KTUNE_MOE_DIM(routing), KTUNE_MOE_DIM(n_group), KTUNE_MOE_DIM(topk_group),
};

const Field<std::uint64_t> kTensors[] = {
    KTUNE_MOE_TENSOR(x),
    KTUNE_MOE_TENSOR(logits),
    KTUNE_MOE_TENSOR(correction_bias),
    KTUNE_MOE_TENSOR(topk_ids),
    KTUNE_MOE_TENSOR(topk_weights),
    KTUNE_MOE_TENSOR(w1),
    KTUNE_MOE_TENSOR(w2),
    KTUNE_MOE_TENSOR(y),
    KTUNE_MOE_TENSOR(expert_counts),
    KTUNE_MOE_TENSOR(aux_loss),
    KTUNE_MOE_TENSOR(w1_scale),
    KTUNE_MOE_TENSOR(w2_scale),
};

constexpr unsigned mode_bit(MoeRoutingMode m) { return 1u << static_cast<int>(m); }

/// A scalar, the routing modes that read it, and the value it must keep in the others: a value
/// a mode would silently ignore is refused (DeepSeek-V2 scales softmax weights; this op does not).
struct Scalar {
  Field<double> field;
  unsigned modes;  // mode_bit()s
  double neutral;
};

#define KTUNE_MOE_SCALAR(f, modes, neutral) \
  { {#f, [](const MoeArgs& a) { return static_cast<double>(a.f); }}, (modes), (neutral) }

const Scalar kScalars[] = {
    KTUNE_MOE_SCALAR(routed_scaling, mode_bit(MoeRoutingMode::sigmoid_group), 1.0),
};

/// The op and the tables in its order, resolved once.
struct Moe {
  const Op* op = nullptr;
  std::size_t routing = 0;                          // index of the routing dim
  const std::vector<std::string>* modes = nullptr;  // its choices
  std::vector<const Field<std::int64_t>*> dims;
  std::vector<const Field<std::uint64_t>*> tensors;
  std::vector<const Scalar*> scalars;
  std::vector<std::vector<MoeTensorUse>> uses;  // [mode][tensor], for dtypes.front()
  std::vector<DType> dtypes;
  // [dtype][mode][tensor]: tensors some dtypes alone use (e4m3's weight scales)
  std::vector<std::vector<std::vector<MoeTensorUse>>> by_dtype;
};

template <typename T, std::size_t N, typename Name>
const T* by_name(const T (&table)[N], const std::string& name, Name name_of, const char* what) {
  for (const T& f : table)
    if (name == name_of(f)) return &f;
  throw Error(std::string("moe: the op's ") + what + " " + name +
              " has no MoeArgs field (runtime/dispatch/moe_args.cpp)");
}

Moe resolve() {
  Moe m;
  m.op = &get_op("moe");
  const Op& op = *m.op;
  const auto field_name = [](const auto& f) { return f.name; };
  for (const DimSpec& d : op.dims())
    m.dims.push_back(by_name(kDims, d.name, field_name, "dimension"));
  for (const ScalarSpec& s : op.scalars())
    m.scalars.push_back(by_name(
        kScalars, s.name, [](const Scalar& c) { return c.field.name; }, "scalar"));
  while (m.routing < op.dims().size() && op.dims()[m.routing].name != "routing") ++m.routing;
  if (m.routing == op.dims().size()) throw Error("moe: the op has no routing dimension");
  m.modes = &op.dims()[m.routing].choices;
  m.dtypes = op.dtypes();
  for (const DType dtype : m.dtypes) {
    std::vector<std::vector<MoeTensorUse>> uses;
    for (std::size_t mode = 0; mode < m.modes->size(); ++mode) {
      Problem p = op.default_problem();
      p.values[m.routing] = static_cast<std::int64_t>(mode);
      std::vector<MoeTensorUse> use;
      for (const TensorSpec& t : op.tensors(p, dtype))
        use.push_back({t.name, !t.optional, t.elements > 0});
      uses.push_back(std::move(use));
    }
    m.by_dtype.push_back(std::move(uses));
  }
  m.uses = m.by_dtype.front();
  for (const MoeTensorUse& u : m.uses.front())
    m.tensors.push_back(by_name(kTensors, u.name, field_name, "tensor"));
  for (const auto& uses : m.by_dtype)
    for (const std::vector<MoeTensorUse>& use : uses)
      if (use.size() != m.tensors.size())
        throw Error("moe: the op's tensors differ in number between routing modes or dtypes");
  if (m.dims.size() > kMaxDims || m.tensors.size() > kMaxTensors || m.scalars.size() > kMaxScalars)
    throw Error("moe: the op has more dimensions, tensors or scalars than the runtime passes");
  return m;
}

const Moe& moe() {
  static const Moe m = resolve();
  return m;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// "softmax, softmax_renorm" for the modes `pick` selects.
template <typename Pick>
std::string modes_where(const Moe& m, Pick pick) {
  std::string out;
  for (std::size_t mode = 0; mode < m.modes->size(); ++mode)
    if (pick(mode)) out += (out.empty() ? "" : ", ") + (*m.modes)[mode];
  return out;
}

std::string null_message(const Moe& m, std::size_t tensor, std::size_t mode) {
  const std::string& name = m.uses[mode][tensor].name;
  const std::string optional =
      modes_where(m, [&](std::size_t o) { return !m.uses[o][tensor].required; });
  if (optional.empty()) return "moe: " + name + " is null (required)";
  return "moe: " + name + " is null, but routing=" + (*m.modes)[mode] +
         " needs it (it may be null with " + optional + ")";
}

std::string unused_message(const Moe& m, std::size_t tensor, std::size_t mode) {
  const std::string& name = m.uses[mode][tensor].name;
  return "moe: " + name + " is set, but routing=" + (*m.modes)[mode] +
         " does not use it (it is used with " +
         modes_where(m, [&](std::size_t o) { return m.uses[o][tensor].used; }) +
         " only): pass null";
}

}  // namespace

const std::vector<std::vector<MoeTensorUse>>& moe_tensor_uses(DType dtype) {
  const Moe& m = moe();
  for (std::size_t d = 0; d < m.dtypes.size(); ++d)
    if (m.dtypes[d] == dtype) return m.by_dtype[d];
  throw InvalidArgument(std::string("moe: dtype ") + dtype_name(dtype) + " is not supported");
}

MoeCall pack_moe(const MoeArgs& a, bool pointers) {
  const Moe& m = moe();
  if (std::find(m.dtypes.begin(), m.dtypes.end(), a.dtype) == m.dtypes.end()) {
    std::string allowed;
    for (DType t : m.dtypes) allowed += (allowed.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw InvalidArgument("moe: dtype " + std::string(dtype_name(a.dtype)) + " (" +
                          std::to_string(static_cast<int>(a.dtype)) +
                          ") is not supported (allowed: " + allowed + ")");
  }
  const auto mode = static_cast<std::int64_t>(a.routing);
  if (mode < 0 || mode >= static_cast<std::int64_t>(m.modes->size())) {
    std::string allowed;
    for (std::size_t o = 0; o < m.modes->size(); ++o)
      allowed += (o ? ", " : "") + (*m.modes)[o] + " (" + std::to_string(o) + ")";
    throw InvalidArgument("moe: routing " + std::to_string(mode) + " is not one of " + allowed);
  }
  const auto mode_index = static_cast<std::size_t>(mode);

  MoeCall c;
  c.ndims = static_cast<int>(m.dims.size());
  for (std::size_t d = 0; d < m.dims.size(); ++d) c.dims[d] = m.dims[d]->get(a);
  // Reused by every call of the thread: checking allocates nothing once it has grown.
  thread_local Problem problem;
  problem.values.assign(c.dims.begin(), c.dims.begin() + c.ndims);
  m.op->check_problem(problem);

  c.nscalars = static_cast<int>(m.scalars.size());
  for (std::size_t s = 0; s < m.scalars.size(); ++s) {
    const Scalar& scalar = *m.scalars[s];
    const double v = scalar.field.get(a);
    const auto named = [&] { return std::string("moe: ") + scalar.field.name + "=" + number(v); };
    if (!std::isfinite(v)) throw InvalidArgument(named() + " is not finite");
    if (!(scalar.modes & (1u << mode)) && v != scalar.neutral)
      throw InvalidArgument(
          named() + " has no effect with routing=" + (*m.modes)[mode_index] + " (only with " +
          modes_where(m, [&](std::size_t o) { return (scalar.modes >> o) & 1u; }) + "): leave it " +
          number(scalar.neutral));
    c.scalars[s] = v;
  }
  if (!pointers) return c;

  c.ntensors = static_cast<int>(m.tensors.size());
  const std::size_t dtype_index = static_cast<std::size_t>(
      std::find(m.dtypes.begin(), m.dtypes.end(), a.dtype) - m.dtypes.begin());
  for (std::size_t t = 0; t < m.tensors.size(); ++t) {
    const std::uint64_t ptr = m.tensors[t]->get(a);
    const MoeTensorUse& use = m.by_dtype[dtype_index][mode_index][t];
    const MoeTensorUse& first = m.uses[mode_index][t];  // the same mode, the first dtype
    if (ptr == 0) {
      if (use.required && !first.required)
        throw InvalidArgument("moe: " + use.name + " is null, but dtype " +
                              dtype_name(a.dtype) + " needs it");
      if (use.required) throw InvalidArgument(null_message(m, t, mode_index));
      continue;
    }
    if (!use.used) {
      bool other_mode = false;  // used in another routing mode with this dtype
      for (const auto& uses : m.by_dtype[dtype_index]) other_mode = other_mode || uses[t].used;
      if (other_mode || first.used) throw InvalidArgument(unused_message(m, t, mode_index));
      std::string with;
      for (std::size_t d = 0; d < m.dtypes.size(); ++d)
        if (m.by_dtype[d][mode_index][t].used)
          with += (with.empty() ? "" : ", ") + std::string(dtype_name(m.dtypes[d]));
      throw InvalidArgument("moe: " + use.name + " is set, but dtype " + dtype_name(a.dtype) +
                            " does not use it (" + (with.empty() ? "no dtype" : with) +
                            " only): pass null");
    }
    if (ptr % kMoeAlignment != 0)
      throw InvalidArgument("moe: " + use.name + " at " + address_text(ptr) + " is not " +
                            std::to_string(kMoeAlignment) +
                            "-byte aligned (every moe tensor must be)");
    c.tensors[t] = ptr;
  }
  c.workspace = {reinterpret_cast<std::uint64_t>(a.workspace), a.workspace_bytes};
  if (auto why = workspace_reason("moe", c.workspace, 0, {})) throw InvalidArgument(*why);
  return c;
}

}  // namespace ktune
