# Empty compiler generated dependencies file for tuner_test.
# This may be replaced when dependencies are built.
