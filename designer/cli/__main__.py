"""`python -m designer.cli`: the `envengineer` command."""

from designer.cli import main

raise SystemExit(main())
