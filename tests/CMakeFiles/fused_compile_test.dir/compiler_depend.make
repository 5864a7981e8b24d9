# Empty compiler generated dependencies file for fused_compile_test.
# This may be replaced when dependencies are built.
