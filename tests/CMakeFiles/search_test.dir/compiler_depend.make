# Empty compiler generated dependencies file for search_test.
# This may be replaced when dependencies are built.
