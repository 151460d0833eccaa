"""`python -m jaxsched ...`: the same command line as `jaxsched ...`."""

import sys

from .cli import main

sys.exit(main())
