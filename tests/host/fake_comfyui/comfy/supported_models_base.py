"""Our model of upstream's comfy/supported_models_base.py, as far as a CLIP goes: ClipTarget,
the tokenizer and text encoder classes a checkpoint's loader builds upstream's CLIP from, with
the text encoder's params."""


class ClipTarget:
    def __init__(self, tokenizer, clip):
        self.clip = clip
        self.tokenizer = tokenizer
        self.params = {}
