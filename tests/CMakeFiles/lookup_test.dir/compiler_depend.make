# Empty compiler generated dependencies file for lookup_test.
# This may be replaced when dependencies are built.
