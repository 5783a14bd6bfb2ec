"""Stand-in for upstream placement test fixtures (see tools/run-osc-placement-tests)."""
