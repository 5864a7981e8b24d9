# Empty dependencies file for core_test.
# This may be replaced when dependencies are built.
