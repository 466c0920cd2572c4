"""Each exercise's own tests, one file per exercise folder (test_<id>.py, id with - as _), each
with its marker (``pytest -m ex_ring``); test_wrong_answers.py runs every folder's named wrong
answers."""
