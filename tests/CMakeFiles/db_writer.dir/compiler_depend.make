# Empty compiler generated dependencies file for db_writer.
# This may be replaced when dependencies are built.
