"""``python -m bench``: same as ``python bench/run.py``."""
# bench.run sets the thread environment variables at its very top, before NumPy loads,
# so it must be the first thing imported here.
from bench.run import main

raise SystemExit(main())
