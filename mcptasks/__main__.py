"""`python -m mcptasks`: the same as the `mcptasks` command."""

import sys

from mcptasks.cli import main

sys.exit(main())
