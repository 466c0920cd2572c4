# For each mutant, list the tests of the WEAK suite that fail on it (kill it):
# test_matches_softmax, test_rows_sum_to_one, test_shape_and_range.
# Read the clean kernel, the five one-line mutants and the weak suite above, then predict.
prediction = {
    "missing-rescale": [],
    "dropped-tail": [],
    "zero-init-max": [],
    "global-max": [],
    "unguarded-inf": [],
}
