"""``python -m mrtr_transports``: the ``mrtr`` command."""

import sys

from .cli.main import main

sys.exit(main())
