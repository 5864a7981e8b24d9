# Empty dependencies file for ktune_test_support.
# This may be replaced when dependencies are built.
