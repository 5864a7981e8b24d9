# Empty dependencies file for compiler_test.
# This may be replaced when dependencies are built.
