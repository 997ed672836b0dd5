"""Sweeps: many `envengineer run` trials from one SPEC file, on Ray, resumable and fault tolerant.

`spec` reads and bounds the SPEC file (docs/sweeps.md), `trials` expands it into validated
`RunSettings` and folder names, `launch` runs them on Ray (retries resume from each trial's run
folder), `report` writes results.jsonl's rows and the sweep's report.md, and `child` is the
process a trial runs in. Every trial is validated before anything is created or launched.
"""

from designer.sweep.launch import Options, Summary, check_resources, plan, run_sweep
from designer.sweep.spec import SweepError, SweepSpec, load_spec, sweep_name, trial_count
from designer.sweep.trials import Trial, expand

__all__ = ["Options", "Summary", "SweepError", "SweepSpec", "Trial", "check_resources", "expand",
           "load_spec", "plan", "run_sweep", "sweep_name", "trial_count"]
