"""python3 -m comfy_supervisor.environments: see cli.py."""

import sys

from .cli import main

sys.exit(main())
