// The MoE layer's fp32 reference (Op::run_reference): routing as the kernels route, then the
// MLP of each token's choices in fp32 on the rows the tuner checks (moe/reference.cuh,
// moe/reference_mlp.cuh), and the workspace it needs.
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "templates/moe/moe_parts.hpp"
#include "templates/moe/reference.cuh"
#include "templates/moe/reference_mlp.cuh"

namespace ktune::moe {

int reference_stride(const Shape& s) { return s.t <= 256 ? 1 : (s.t + 255) / 256; }

namespace {

/// Workspace of the sampled reference: each token's choices (k, or up to e for expert_choice),
/// then act [samples, choices, I] fp32.
struct RefLayout {
  int max_choices = 0, stride = 1, samples = 0;
  std::size_t ids = 0, weights = 0, counts = 0, act = 0, total = 0;
};

RefLayout reference_layout(const Shape& s) {
  RefLayout l;
  l.max_choices = s.routing == moe_expert_choice ? s.e : s.k;
  l.stride = reference_stride(s);
  l.samples = (s.t + l.stride - 1) / l.stride;
  std::size_t at = 0;
  const auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at += (bytes + kAlign - 1) / kAlign * kAlign;
    return start;
  };
  const auto choices = static_cast<std::size_t>(s.t) * static_cast<std::size_t>(l.max_choices);
  l.ids = take(choices * 4);
  l.weights = take(choices * 4);
  l.counts = take(static_cast<std::size_t>(s.t) * 4);
  l.act = take(static_cast<std::size_t>(l.samples) * static_cast<std::size_t>(l.max_choices) *
               static_cast<std::size_t>(s.i) * 4);
  l.total = at;
  return l;
}

}  // namespace

std::vector<KernelSource> reference_kernels(const Shape& s, DType t) {
  // <x and y's type, the weights' type>: e4m3 weights with bf16 x and y.
  const std::string TW = std::string(kernel_type(io_type(t))) + ", " + kernel_type(t);
  // Past 256 experts the kernels' EMAX = 512 forms (per-expert arrays of 512).
  const std::string emax = emax_arg(s.e);
  std::vector<KernelSource> out = {
      {"moe/reference.cuh", "ktune::moe_reference_kernel<" + TW + emax + ">"},
      {"moe/reference.cuh",
       emax.empty() ? std::string("ktune::moe_reference_stats_kernel")
                    : "ktune::moe_reference_stats_wide_kernel<" + str(moe_emax(s.e)) + ">"},
      {"moe/reference_mlp.cuh", "ktune::moe_reference_act_kernel<" + TW + ">"},
      {"moe/reference_mlp.cuh",
       "ktune::moe_reference_out_kernel<" + std::string(kernel_type(t)) + emax + ">"}};
  // expert_choice: its selection kernel is appended (index 4) and launched before the others.
  if (s.expert_choice())
    out.push_back({"moe/reference.cuh", "ktune::moe_reference_expert_choice_kernel"});
  return out;
}

std::size_t reference_workspace_bytes(const Shape& s) { return reference_layout(s).total; }

void launch_reference(const RunArgs& a, Launcher& launcher) {
  const Shape s = shape_of(*a.problem);
  const bool routed = s.routed();
  MoeReferenceArgs r{};
  r.x = tensor(a, 0);
  if (routed) {
    r.logits = static_cast<const float*>(tensor(a, 1));
    r.topk_ids = static_cast<float*>(tensor(a, 3));
    r.topk_weights = static_cast<float*>(tensor(a, 4));
    if (s.route_kernel()) r.aux_loss = static_cast<float*>(tensor(a, 9));
  } else {
    r.ids_in = static_cast<const int*>(tensor(a, 3));
    r.weights_in = static_cast<const float*>(tensor(a, 4));
  }
  if (s.routing == moe_sigmoid_group) r.correction_bias = static_cast<const float*>(tensor(a, 2));
  r.w1 = tensor(a, 5);
  r.w2 = tensor(a, 6);
  if (a.dtype == DType::e4m3) {
    r.w1_scale = static_cast<const float*>(tensor(a, 10));
    r.w2_scale = static_cast<const float*>(tensor(a, 11));
    if (!r.w1_scale || !r.w2_scale)
      throw InvalidArgument("moe reference: dtype e4m3 needs w1_scale and w2_scale");
  }
  r.y = static_cast<float*>(tensor(a, 7));
  r.expert_counts = static_cast<float*>(tensor(a, 8));
  r.tokens = s.t;
  r.experts = s.e;
  r.k = s.k;
  r.hidden = s.h;
  r.inter = s.i;
  r.routing = s.routing;
  r.n_group = s.n_group;
  r.topk_group = s.topk_group;
  r.routed_scaling = s.routing == moe_sigmoid_group ? static_cast<float>(a.scalars[0]) : 1.0f;
  if (routed && (!r.topk_ids || !r.topk_weights))
    throw InvalidArgument("moe reference: topk_ids and topk_weights outputs are required");
  // With a workspace, the MLP runs in the parallel kernels of reference_mlp.cuh for the
  // sampled rows (those tensors() tells the tuner to check); without one, one block per token
  // computes every row.
  const RefLayout rl = reference_layout(s);
  const auto ws = [&](std::size_t off) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.workspace + off));
  };
  if (a.workspace) {
    r.choice_id = static_cast<int*>(ws(rl.ids));
    r.choice_w = static_cast<float*>(ws(rl.weights));
    r.choice_n = static_cast<int*>(ws(rl.counts));
    r.max_choices = rl.max_choices;
  }
  KernelLaunch k;
  k.block[0] = kMoeReferenceThreads;
  k.args = &r;
  k.args_size = sizeof r;
  if (s.expert_choice()) {
    k.kernel = a.kernels[4];
    k.grid[0] = static_cast<unsigned>(s.e);
    launcher.launch(k);
  }
  k.kernel = a.kernels[0];
  k.grid[0] = static_cast<unsigned>(s.t);
  launcher.launch(k);
  k.kernel = a.kernels[1];
  k.grid[0] = 1;
  k.block[0] = kMoeReferenceStatsThreads;
  launcher.launch(k);
  if (!a.workspace) return;
  MoeRefMlpArgs m{};
  m.x = r.x;
  m.w1 = r.w1;
  m.w2 = r.w2;
  m.w1_scale = r.w1_scale;
  m.w2_scale = r.w2_scale;
  m.choice_id = r.choice_id;
  m.choice_w = r.choice_w;
  m.choice_n = r.choice_n;
  m.act = static_cast<float*>(ws(rl.act));
  m.y = r.y;
  m.tokens = s.t;
  m.experts = s.e;
  m.hidden = s.h;
  m.inter = s.i;
  m.max_choices = rl.max_choices;
  m.sample_stride = rl.stride;
  KernelLaunch mk;
  mk.kernel = a.kernels[2];
  mk.grid[0] = static_cast<unsigned>(rl.samples);
  mk.grid[1] = static_cast<unsigned>((s.i + kMoeRefCols - 1) / kMoeRefCols);
  mk.block[0] = kMoeRefMlpThreads;
  mk.args = &m;
  mk.args_size = sizeof m;
  launcher.launch(mk);
  mk.kernel = a.kernels[3];
  mk.grid[1] = static_cast<unsigned>((s.h + kMoeRefCols - 1) / kMoeRefCols);
  launcher.launch(mk);
}

}  // namespace ktune::moe
