# CMAKE generated file: DO NOT EDIT!
# Timestamp file for compiler generated dependencies management for search_test.
