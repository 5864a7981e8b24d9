file(REMOVE_RECURSE
  "CMakeFiles/ktune_test_support.dir/support/fused_reference.cpp.o"
  "CMakeFiles/ktune_test_support.dir/support/fused_reference.cpp.o.d"
  "CMakeFiles/ktune_test_support.dir/support/test_env.cpp.o"
  "CMakeFiles/ktune_test_support.dir/support/test_env.cpp.o.d"
  "libktune_test_support.a"
  "libktune_test_support.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ktune_test_support.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
