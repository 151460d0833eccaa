"""`python -m jaxsched.cli`."""

import sys

from . import main

sys.exit(main())
