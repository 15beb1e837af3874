"""Our model of upstream's folder_paths.py: the model folders by kind, and the output,
input and user directories, with upstream's names for the calls main.py makes."""

import os

base_path = os.path.dirname(os.path.realpath(__file__))
folder_names_and_paths = {}
output_directory = os.path.join(base_path, "output")
input_directory = os.path.join(base_path, "input")
user_directory = os.path.join(base_path, "user")


def add_model_folder_path(folder_name, full_folder_path, is_default=False):
    paths = folder_names_and_paths.setdefault(folder_name, [])
    if full_folder_path in paths:
        return
    if is_default:
        paths.insert(0, full_folder_path)
    else:
        paths.append(full_folder_path)


def get_folder_paths(folder_name):
    return list(folder_names_and_paths.get(folder_name, []))


def set_output_directory(output_dir):
    global output_directory
    output_directory = output_dir


def get_output_directory():
    return output_directory


def set_input_directory(input_dir):
    global input_directory
    input_directory = input_dir


def set_user_directory(user_dir):
    global user_directory
    user_directory = user_dir
