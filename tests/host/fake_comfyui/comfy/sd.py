"""Our model of upstream's comfy/sd.py for small CPU models: CLIP (tokenize to weighted
tokens, encode_from_tokens, encode_from_tokens_scheduled, clone sharing the text encoder
with a cloned patcher, add_patches through it) and VAE (encode pixels to latents at an
eighth of their size, decode back, and the tiled forms). Seeded weights, so that two
processes build the same models."""

import torch

import comfy.model_management
import comfy.model_patcher

TOKENS = 8        # a tokenized text's length
VOCABULARY = 256  # a token is a byte of the text


class TextEncoder(torch.nn.Module):
    def __init__(self, context_dim=16):
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCABULARY, context_dim)
        self.proj = torch.nn.Linear(context_dim, context_dim)

    def encode_token_weights(self, token_weight_pairs):
        pairs = token_weight_pairs["l"][0]
        tokens = torch.tensor([[token for token, _ in pairs]])
        weights = torch.tensor([[weight for _, weight in pairs]], dtype=torch.float32).unsqueeze(-1)
        cond = self.proj(self.embedding(tokens)) * weights
        return cond, cond.mean(dim=1)


class CLIP:
    def __init__(self, target=None, no_init=False):
        if no_init:
            return
        torch.manual_seed(1)
        self.cond_stage_model = TextEncoder()
        self.patcher = comfy.model_patcher.ModelPatcher(self.cond_stage_model, comfy.model_management.GPU,
                                                        comfy.model_management.CPU)
        self.layer_idx = None
        self.use_clip_schedule = False
        self.tokenizer_options = {}

    def clone(self):
        n = CLIP(no_init=True)
        n.patcher = self.patcher.clone()
        n.cond_stage_model = self.cond_stage_model
        n.layer_idx = self.layer_idx
        n.tokenizer_options = self.tokenizer_options.copy()
        n.use_clip_schedule = self.use_clip_schedule
        return n

    def add_patches(self, patches, strength_patch=1.0, strength_model=1.0):
        return self.patcher.add_patches(patches, strength_patch, strength_model)

    def clip_layer(self, layer_idx):
        self.layer_idx = layer_idx

    def tokenize(self, text, return_word_ids=False, **kwargs):
        data = list(text.encode("utf-8")[:TOKENS]) + [0] * max(0, TOKENS - len(text.encode("utf-8")))
        return {"l": [[(token, 1.0) for token in data]]}

    def load_model(self):
        comfy.model_management.load_models_gpu([self.patcher])
        return self.patcher

    def encode_from_tokens(self, tokens, return_pooled=False, return_dict=False):
        self.load_model()
        model = self.patcher.patch_model()
        try:
            cond, pooled = model.encode_token_weights(tokens)
        finally:
            self.patcher.unpatch_model()
        if return_dict:
            return {"cond": cond, "pooled_output": pooled}
        if return_pooled:
            return cond, pooled
        return cond

    def encode_from_tokens_scheduled(self, tokens, unprojected=False, add_dict={}, show_pbar=True):
        out = self.encode_from_tokens(tokens, return_pooled=False, return_dict=True)
        cond = out.pop("cond")
        return [[cond, {**out, **add_dict}]]

    def encode(self, text):
        return self.encode_from_tokens(self.tokenize(text))


class AutoEncoder(torch.nn.Module):
    def __init__(self, channels=4):
        super().__init__()
        self.encoder = torch.nn.Conv2d(3, channels, kernel_size=8, stride=8)
        self.decoder = torch.nn.ConvTranspose2d(channels, 3, kernel_size=8, stride=8)


class VAE:
    def __init__(self, sd=None, device=None, config=None, dtype=None, metadata=None):
        torch.manual_seed(2)
        self.first_stage_model = AutoEncoder()
        self.downscale_ratio = 8
        self.upscale_ratio = 8
        self.latent_channels = 4
        self.output_channels = 3
        self.patcher = comfy.model_patcher.ModelPatcher(self.first_stage_model, comfy.model_management.GPU,
                                                        comfy.model_management.CPU)

    def encode(self, pixel_samples):
        comfy.model_management.load_models_gpu([self.patcher])
        with torch.no_grad():
            return self.first_stage_model.encoder(pixel_samples.movedim(-1, 1))

    def decode(self, samples_in, vae_options={}):
        comfy.model_management.load_models_gpu([self.patcher])
        with torch.no_grad():
            return self.first_stage_model.decoder(samples_in).movedim(1, -1).clamp(0.0, 1.0)

    def encode_tiled(self, pixel_samples, tile_x=None, tile_y=None, overlap=None, tile_t=None, overlap_t=None):
        return self.encode(pixel_samples)

    def decode_tiled(self, samples, tile_x=None, tile_y=None, overlap=None, tile_t=None, overlap_t=None):
        return self.decode(samples)

    def spacial_compression_encode(self):
        return self.downscale_ratio

    def spacial_compression_decode(self):
        return self.upscale_ratio


def load_checkpoint_guess_config(ckpt_path, output_vae=True, output_clip=True, output_clipvision=False,
                                 embedding_directory=None, output_model=True, model_options={}, te_model_options={}):
    """A small model of each kind, whatever the path: (MODEL, CLIP, VAE, CLIP_VISION)."""
    import comfy.model_base
    torch.manual_seed(0)
    model = comfy.model_base.model_from_config({"channels": 4, "dim": 32, "context_dim": 16, "heads": 4})
    patcher = comfy.model_patcher.ModelPatcher(model, comfy.model_management.GPU, comfy.model_management.CPU)
    return (patcher, CLIP() if output_clip else None, VAE() if output_vae else None, None)
