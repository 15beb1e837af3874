"""Our model of upstream's comfy/weight_adapter package: its adapters, by the names upstream's
package exports."""

from .base import WeightAdapterBase
from .lora import LoRAAdapter

__all__ = ["WeightAdapterBase", "LoRAAdapter"]
