"""comfyui-check's stand-in for transformers' CLIPTokenizer, as upstream's SDTokenizer calls it
(from_pretrained, a call on a text, get_vocab), for an interpreter without transformers:
support.py puts it into the transformers stand-in, so that upstream's own SD1Tokenizer and
SDTokenizer run unchanged over it in ComfyUI's process and in every worker. Each word is a
fixed id from its CRC-32, between CLIP's start (49406) and end (49407) tokens."""

import zlib

__all__ = ["CLIPTokenizer"]


class CLIPTokenizer:
    START, END = 49406, 49407

    @classmethod
    def from_pretrained(cls, path, **_):
        return cls()

    def __call__(self, text):
        return {"input_ids": [self.START] + [1 + zlib.crc32(word.encode()) % 49000 for word in text.split()]
                + [self.END]}

    def get_vocab(self):
        return {"<|startoftext|>": self.START, "<|endoftext|>": self.END}
