"""comfyui-check's graphs for real packs (real_pack_steps.py): one module per concern,
graphs.py (each pack's prompts) and lora.py (the seeded LoRA rgthree's loader reads)."""
