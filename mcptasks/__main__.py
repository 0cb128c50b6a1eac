"""`python -m mcptasks`: the same as the `mcptasks` command."""

import sys

from mcptasks.cli.main import main

sys.exit(main())
