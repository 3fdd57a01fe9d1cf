from core.lens.where_from.cli import main

raise SystemExit(main())
