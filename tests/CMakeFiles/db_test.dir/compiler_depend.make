# Empty compiler generated dependencies file for db_test.
# This may be replaced when dependencies are built.
