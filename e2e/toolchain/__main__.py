"""`python -m e2e.toolchain [build|path]`."""

import sys

from e2e.toolchain.build import main

sys.exit(main(sys.argv[1:]))
