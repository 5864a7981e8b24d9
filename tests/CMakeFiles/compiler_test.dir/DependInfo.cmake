
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/compiler_test.cpp" "tests/CMakeFiles/compiler_test.dir/compiler_test.cpp.o" "gcc" "tests/CMakeFiles/compiler_test.dir/compiler_test.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/CMakeFiles/ktune_templates.dir/DependInfo.cmake"
  "/work/main/CMakeFiles/ktune_core.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
