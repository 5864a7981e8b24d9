file(REMOVE_RECURSE
  "CMakeFiles/db_writer.dir/db_writer.cpp.o"
  "CMakeFiles/db_writer.dir/db_writer.cpp.o.d"
  "db_writer"
  "db_writer.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/db_writer.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
