"""Our model of upstream's nodes.py, for its one table comfy_supervisor fills: the folders
of front-end files by pack name, which upstream's server serves under /extensions/NAME."""

EXTENSION_WEB_DIRS = {}
