file(REMOVE_RECURSE
  "CMakeFiles/core_test.dir/device_test.cpp.o"
  "CMakeFiles/core_test.dir/device_test.cpp.o.d"
  "CMakeFiles/core_test.dir/hash_test.cpp.o"
  "CMakeFiles/core_test.dir/hash_test.cpp.o.d"
  "CMakeFiles/core_test.dir/types_test.cpp.o"
  "CMakeFiles/core_test.dir/types_test.cpp.o.d"
  "core_test"
  "core_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/core_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
