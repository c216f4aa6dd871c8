from streaming_engine.cli import main

raise SystemExit(main())
