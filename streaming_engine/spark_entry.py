"""Driver entry file for spark-submit (see ./spark-submit.sh).

spark-submit needs a .py file to run; this one runs the engine CLI with the
flags spark-submit forwards (``sys.argv[1:]``), like ``python -m streaming_engine``.
"""

import os
import sys

if __name__ == "__main__":
    # Run as a script, Python puts this file's folder (streaming_engine/) first
    # on sys.path, where its subpackages (config, plan, ...) would shadow
    # top-level modules of the same name. The package itself is importable from
    # --py-files or the editable install.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]

    from streaming_engine.cli import main

    raise SystemExit(main())
