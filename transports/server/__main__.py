"""``python -m mrtr_transports.server``: serve an app (the same entry as ``mrtr serve``)."""

import sys

from .entry import SERVER_MODULE, main

sys.exit(main(SERVER_MODULE))
