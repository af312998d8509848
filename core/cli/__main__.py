"""``python -m idbench.cli`` (what `accelerate launch -m idbench.cli` runs): the ``idbench`` command line."""

import sys

from idbench.cli import main

sys.exit(main())
