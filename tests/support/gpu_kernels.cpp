#include "tests/support/gpu_kernels.hpp"

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runtime/core/compiler.hpp"
#include "tests/support/fused_reference.hpp"
#include "tests/support/test_env.hpp"

namespace ktune::test {

const std::filesystem::path& kernel_cache_dir() {
  static TempDir dir;
  return dir.path();
}

CUfunction load_kernel(const KernelSource& source, const DeviceInfo& dev, unsigned dynamic_smem) {
  static std::map<std::string, std::pair<std::unique_ptr<Module>, CUfunction>> loaded;
  auto it = loaded.find(source.name_expression);
  if (it == loaded.end()) {
    const CompiledKernel ck = Compiler(kernel_cache_dir()).compile({source, dev.arch(), {}});
    auto module = std::make_unique<Module>(ck.cubin);
    const CUfunction f = module->function(ck.lowered_name);
    it = loaded.emplace(source.name_expression, std::make_pair(std::move(module), f)).first;
  }
  if (dynamic_smem > 0)
    KTUNE_CU(Driver::get().cuFuncSetAttribute(
        it->second.second, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        static_cast<int>(dynamic_smem)));
  return it->second.second;
}

DeviceBuffer upload_random(DType t, std::vector<double>& values, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (double& v : values) {
    v = round_to(t, u(rng));
    if (v == 0.0) v = 0.25;
  }
  return upload_values(t, values);
}

DeviceBuffer upload_values(DType t, std::vector<double>& values) {
  if (t == DType::e4m3) {
    std::vector<std::uint8_t> bytes(values.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      values[i] = round_to(t, values[i]);
      bytes[i] = float_to_e4m3_bits(static_cast<float>(values[i]));
    }
    DeviceBuffer dev(bytes.size());
    KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), bytes.data(), bytes.size()));
    return dev;
  }
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    values[i] = round_to(t, values[i]);
    bits[i] = t == DType::bf16 ? float_to_bf16_bits(static_cast<float>(values[i]))
                               : float_to_fp16_bits(static_cast<float>(values[i]));
  }
  DeviceBuffer dev(bits.size() * 2);
  KTUNE_CU(Driver::get().cuMemcpyHtoD(dev.get(), bits.data(), bits.size() * 2));
  return dev;
}

std::string param_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

PoisonedOutputs::PoisonedOutputs(std::size_t o_count, std::size_t lse_count)
    : o(o_count * 2), lse(lse_count * 4), o_elements(o_count), lse_elements(lse_count) {}

void PoisonedOutputs::poison(DType t) {
  const Driver& cu = Driver::get();
  // e4m3 inputs write bf16.
  KTUNE_CU(cu.cuMemsetD16Async(o.get(), t == DType::f16 ? 0x7e00 : 0x7fc0, o_elements, nullptr));
  KTUNE_CU(cu.cuMemsetD32Async(lse.get(), 0x7fc00000u, lse_elements, nullptr));
  KTUNE_CU(cu.cuCtxSynchronize());
}

std::vector<std::uint16_t> PoisonedOutputs::o_bits() const {
  std::vector<std::uint16_t> bits(o_elements);
  KTUNE_CU(Driver::get().cuMemcpyDtoH(bits.data(), o.get(), bits.size() * 2));
  return bits;
}

std::vector<float> PoisonedOutputs::lse_values() const {
  std::vector<float> v(lse_elements);
  KTUNE_CU(Driver::get().cuMemcpyDtoH(v.data(), lse.get(), v.size() * 4));
  return v;
}

}  // namespace ktune::test
