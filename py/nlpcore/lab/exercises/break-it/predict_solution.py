# SOLUTION BEGIN
# # For each mutant, list the tests of the WEAK suite that fail on it (kill it):  STARTER
# # test_matches_softmax, test_rows_sum_to_one, test_shape_and_range.  STARTER
# # Read the clean kernel, the five one-line mutants and the weak suite above, then predict.  STARTER
# # Every None is "not answered yet": replace each one with a list of test names,  STARTER
# # [] if no test of the weak suite kills that mutant.  STARTER
# prediction = {  STARTER
#     "missing-rescale": None,  STARTER
#     "dropped-tail": None,  STARTER
#     "zero-init-max": None,  STARTER
#     "global-max": None,  STARTER
#     "unguarded-inf": None,  STARTER
# }  STARTER
prediction = {
    # l is too large once the max grows, so values are off and rows sum to less than 1
    "missing-rescale": ["test_matches_softmax", "test_rows_sum_to_one"],
    # 30 = 3·8 + 6: the last 6 columns are left out of l, so rows sum to more than 1
    # (the other two tests use N a multiple of the block)
    "dropped-tail": ["test_rows_sum_to_one"],
    # any shift >= the row max is exact in real arithmetic; randn rows never underflow
    "zero-init-max": [],
    # likewise: one max for all rows is still exact unless some row is far below it
    "global-max": [],
    # no test has a row whose first block is all -inf
    "unguarded-inf": [],
}
# SOLUTION END
