# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[core_test]=] "/work/main/tests/core_test")
set_tests_properties([=[core_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;23;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[compiler_test]=] "/work/main/tests/compiler_test")
set_tests_properties([=[compiler_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;24;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[db_test]=] "/work/main/tests/db_test")
set_tests_properties([=[db_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;25;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[fused_ops_test]=] "/work/main/tests/fused_ops_test")
set_tests_properties([=[fused_ops_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;31;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[fused_compile_test]=] "/work/main/tests/fused_compile_test")
set_tests_properties([=[fused_compile_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;32;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[search_test]=] "/work/main/tests/search_test")
set_tests_properties([=[search_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;33;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[lookup_test]=] "/work/main/tests/lookup_test")
set_tests_properties([=[lookup_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;34;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[cli_test]=] "/work/main/tests/cli_test")
set_tests_properties([=[cli_test]=] PROPERTIES  LABELS "cpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;35;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[tuner_test]=] "/work/main/tests/tuner_test")
set_tests_properties([=[tuner_test]=] PROPERTIES  LABELS "gpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;37;ktune_test;/work/main/tests/CMakeLists.txt;0;")
add_test([=[gpu_fused_test]=] "/work/main/tests/gpu_fused_test")
set_tests_properties([=[gpu_fused_test]=] PROPERTIES  LABELS "gpu" TIMEOUT "900" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;12;add_test;/work/main/tests/CMakeLists.txt;39;ktune_test;/work/main/tests/CMakeLists.txt;0;")
