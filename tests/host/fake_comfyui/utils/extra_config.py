"""Our model of upstream's utils/extra_config.py: main.py imports it first and loads
extra_model_paths.yaml through it. Here a config names folders by kind, one per line
("kind: /path"), enough to prove the worker loads the same files the host does."""

import folder_paths


def load_extra_path_config(yaml_path):
    with open(yaml_path) as config:
        for line in config:
            kind, _, path = line.partition(":")
            if path.strip():
                folder_paths.add_model_folder_path(kind.strip(), path.strip())
