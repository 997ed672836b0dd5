"""The test suite: one folder per package under test (`jaxenv/`, `policy/`, `designer/`), whole
runs of the command in `e2e/`, helpers shared across folders in `helpers/`."""
