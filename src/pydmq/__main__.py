"""``python -m pydmq`` is the ``pydmq`` command."""

import sys

from pydmq.cli import main

sys.exit(main())
