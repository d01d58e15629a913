from microcoder.launch.cli.main import main

raise SystemExit(main())
