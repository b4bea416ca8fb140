from ddpctl.cli import main

raise SystemExit(main())
