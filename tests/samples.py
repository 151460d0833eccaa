"""Where the real trace samples are (../shared/data beside the repository), and the mark for tests that need them."""

import os

import pytest

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "data")
GOOGLE = os.path.join(DATA, "google2011")
ALIBABA = os.path.join(DATA, "alibaba-gpu-v2023")
needs_samples = pytest.mark.skipif(not os.path.isdir(GOOGLE), reason="shared/data samples not present")
