"""A simulated GPU cluster for the demo, tests and benchmarks."""
