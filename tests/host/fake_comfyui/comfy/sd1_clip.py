"""Our model of upstream's comfy/sd1_clip.py, as far as a CLIP's text encoder and tokenizer
go: SD1ClipModel, built as upstream's CLIP builds its target's class (device, dtype,
model_options and the target's params), with upstream's clip options (the layer) and
encode_token_weights; SD1Tokenizer, built from (embedding_directory, tokenizer_data), whose
tokenize_with_weights makes each byte of the text a token of weight 1."""

import torch

VOCABULARY = 256  # a token is a byte of the text


class SD1ClipModel(torch.nn.Module):
    def __init__(self, device="cpu", dtype=None, model_options={}, width=16):
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCABULARY, width, device=device, dtype=dtype)
        self.proj = torch.nn.Linear(width, width, device=device, dtype=dtype)
        self.dtypes = {dtype} if dtype is not None else set()
        self.layer = "last"

    def set_clip_options(self, options):
        # As upstream's: a layer index asks for a hidden state before the last one (here, the
        # embeddings, before the projection).
        if "layer" in options:
            self.layer = "hidden" if options["layer"] < -1 else "last"

    def reset_clip_options(self):
        self.layer = "last"

    def encode_token_weights(self, token_weight_pairs):
        pairs = token_weight_pairs["l"][0]
        tokens = torch.tensor([[token for token, _ in pairs]])
        weights = torch.tensor([[weight for _, weight in pairs]], dtype=torch.float32).unsqueeze(-1)
        hidden = self.embedding(tokens)
        cond = (hidden if self.layer == "hidden" else self.proj(hidden)) * weights
        return cond, cond.mean(dim=1)


class SD1Tokenizer:
    def __init__(self, embedding_directory=None, tokenizer_data={}):
        self.embedding_directory = embedding_directory
        self.max_length = tokenizer_data.get("clip_l_max_length", 8)

    def tokenize_with_weights(self, text, return_word_ids=False, **kwargs):
        data = list(text.encode("utf-8")[:self.max_length])
        return {"l": [[(token, 1.0) for token in data + [0] * (self.max_length - len(data))]]}
