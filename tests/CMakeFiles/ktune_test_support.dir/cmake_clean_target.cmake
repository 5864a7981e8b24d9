file(REMOVE_RECURSE
  "libktune_test_support.a"
)
