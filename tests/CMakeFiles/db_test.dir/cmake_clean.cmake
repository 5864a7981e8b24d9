file(REMOVE_RECURSE
  "CMakeFiles/db_test.dir/db_test.cpp.o"
  "CMakeFiles/db_test.dir/db_test.cpp.o.d"
  "db_test"
  "db_test.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/db_test.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
