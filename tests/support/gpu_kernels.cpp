#include "tests/support/gpu_kernels.hpp"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runtime/core/compiler.hpp"
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

}  // namespace ktune::test
