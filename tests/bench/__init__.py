"""Benchmarks of the bus: ``make bench`` (``python -m tests.bench.run_all``) writes docs/benchmarks/README.md.

Not a test suite: nothing here is collected by pytest (no ``test_*`` modules) and nothing asserts a
figure; targets are reported as PASS or MISS.
"""
