"""``python -m mrtr_transports``: the ``mrtr`` command."""

import sys

from .cli.console import main

sys.exit(main())
