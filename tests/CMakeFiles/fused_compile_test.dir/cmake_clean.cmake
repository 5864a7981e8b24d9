file(REMOVE_RECURSE
  "CMakeFiles/fused_compile_test.dir/fused_compile_test.cpp.o"
  "CMakeFiles/fused_compile_test.dir/fused_compile_test.cpp.o.d"
  "fused_compile_test"
  "fused_compile_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/fused_compile_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
