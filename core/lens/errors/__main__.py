from core.lens.errors.cli import main

raise SystemExit(main())
