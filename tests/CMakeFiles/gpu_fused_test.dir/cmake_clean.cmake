file(REMOVE_RECURSE
  "CMakeFiles/gpu_fused_test.dir/gpu_fused_test.cpp.o"
  "CMakeFiles/gpu_fused_test.dir/gpu_fused_test.cpp.o.d"
  "gpu_fused_test"
  "gpu_fused_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/gpu_fused_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
