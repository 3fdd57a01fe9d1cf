from core.lens.edit.cli import main

raise SystemExit(main())
