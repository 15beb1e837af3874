"""Our model of upstream's app/logger.py: setup_logger gives the root logger ComfyUI's
level (--verbose) and a handler writing each message alone, on stderr (with use_stdout,
what is below ERROR on stdout)."""

import logging
import sys


def setup_logger(log_level="INFO", capacity=300, use_stdout=False):
    logger = logging.getLogger()
    logger.setLevel(log_level)
    handler = logging.StreamHandler(sys.stdout if use_stdout else sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
