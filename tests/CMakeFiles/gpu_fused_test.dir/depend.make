# Empty dependencies file for gpu_fused_test.
# This may be replaced when dependencies are built.
