from microcoder.launch.cli import main

raise SystemExit(main())
