"""Our model of upstream's comfy/weight_adapter/base.py: what every adapter is."""


class WeightAdapterBase:
    name: str
    loaded_keys: set
    weights: list
