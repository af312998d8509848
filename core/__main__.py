"""``python -m idbench``: the same command line as the ``idbench`` script."""

import sys

from idbench.cli import main

sys.exit(main())
