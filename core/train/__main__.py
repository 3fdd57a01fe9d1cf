"""`python -m core.train`: the command line in core/train/cli.py."""

from core.train.cli import main

raise SystemExit(main())
