file(REMOVE_RECURSE
  "CMakeFiles/compiler_test.dir/compiler_test.cpp.o"
  "CMakeFiles/compiler_test.dir/compiler_test.cpp.o.d"
  "compiler_test"
  "compiler_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/compiler_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
