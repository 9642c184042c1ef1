from uwsgitune.cli.main import main

raise SystemExit(main())
