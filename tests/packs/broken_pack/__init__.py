"""A custom node pack whose dependency is not installed in its venv: importing it fails."""

import some_dependency_not_installed  # noqa: F401

NODE_CLASS_MAPPINGS = {}
