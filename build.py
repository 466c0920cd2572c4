"""Build the FlashAttention lab into dist/ and (optionally) serve it: ``python3 build.py [serve]``.

The work is done by :mod:`labtools.build` (importable by tests and benchmarks); run with
``--help`` for the options.
"""
import sys

from labtools.build import main

if __name__ == "__main__":
    sys.exit(main())
