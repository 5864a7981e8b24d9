file(REMOVE_RECURSE
  "CMakeFiles/search_test.dir/search_test.cpp.o"
  "CMakeFiles/search_test.dir/search_test.cpp.o.d"
  "search_test"
  "search_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/search_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
