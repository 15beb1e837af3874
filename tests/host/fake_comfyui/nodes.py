"""Our model of upstream's nodes.py, for what comfy_supervisor depends on: the folders of
front-end files by pack name, which upstream's server serves under /extensions/NAME; and,
as upstream does on import, comfy/ put first on the module path (after which `utils` is
comfy/utils.py to anything that imports it for the first time)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "comfy"))

EXTENSION_WEB_DIRS = {}
