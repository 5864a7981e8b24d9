# Empty compiler generated dependencies file for fused_ops_test.
# This may be replaced when dependencies are built.
