"""`python -m core.lens.extrapolation extrapolation CHECKPOINT...` (see core.lens.extrapolation.cli)."""

from core.lens.extrapolation.cli import main

raise SystemExit(main())
