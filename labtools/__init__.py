"""Tools around the lab, not shipped with it: building and serving ``dist/``
(:mod:`labtools.build`, whose command line is the repository's ``build.py``) and launching
headless Chromium with WebGPU (:mod:`labtools.chromium`). Tests and benchmarks import them; the
repository root must be on ``sys.path`` (pytest's ``pythonpath`` setting, ``bench/common.py``).
"""
