file(REMOVE_RECURSE
  "CMakeFiles/fused_ops_test.dir/fused_ops_test.cpp.o"
  "CMakeFiles/fused_ops_test.dir/fused_ops_test.cpp.o.d"
  "CMakeFiles/fused_ops_test.dir/fused_reference_test.cpp.o"
  "CMakeFiles/fused_ops_test.dir/fused_reference_test.cpp.o.d"
  "fused_ops_test"
  "fused_ops_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/fused_ops_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
