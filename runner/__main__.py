"""`python -m runner --worker W --api URL --token T -- COMMAND [ARGS]`."""

from __future__ import annotations

import sys

from runner.cli import main

sys.exit(main())
