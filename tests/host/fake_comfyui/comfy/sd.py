"""Our model of upstream's comfy/sd.py for small CPU models: CLIP (upstream's shape: built
from a ClipTarget of comfy/sd1_clip.py's classes; tokenize to weighted tokens,
encode_from_tokens once its weights are loaded with their patches,
encode_from_tokens_scheduled, clone sharing the text encoder and tokenizer with a cloned
patcher, add_patches through it) and VAE (built as upstream's from a state dict, encode
pixels to latents at an eighth of their size, decode back, and the tiled forms). Seeded
weights, so that two processes build the same models."""

import torch

import comfy.hooks
import comfy.model_management
import comfy.model_patcher
import comfy.utils
from comfy.ldm.models.autoencoder import AutoencoderKL
import comfy.sd1_clip
import comfy.supported_models_base
import comfy.weight_adapter

class CLIP:
    """As upstream's: built from a ClipTarget, its text encoder the target's clip class built
    with the target's params, dtype, device and model_options, its tokenizer the target's
    tokenizer class built with (embedding_directory, tokenizer_data); a MinVram hook mode,
    and is_clip."""

    def __init__(self, target=None, embedding_directory=None, no_init=False, tokenizer_data={}, parameters=0,
                 model_options={}):
        if no_init:
            return
        params = target.params.copy()
        load_device = model_options.get("load_device", comfy.model_management.GPU)
        offload_device = model_options.get("offload_device", comfy.model_management.CPU)
        params["dtype"] = model_options.get("dtype", torch.float32)
        params["device"] = model_options.get("initial_device", offload_device)
        params["model_options"] = model_options
        self.cond_stage_model = target.clip(**params)
        self.tokenizer = target.tokenizer(embedding_directory=embedding_directory, tokenizer_data=tokenizer_data)
        self.patcher = comfy.model_patcher.ModelPatcher(self.cond_stage_model, load_device, offload_device)
        self.patcher.hook_mode = comfy.hooks.EnumHookMode.MinVram
        self.patcher.is_clip = True
        self.apply_hooks_to_conds = None
        self.layer_idx = None
        self.use_clip_schedule = False
        self.tokenizer_options = {}

    def clone(self):
        n = CLIP(no_init=True)
        n.patcher = self.patcher.clone()
        n.cond_stage_model = self.cond_stage_model
        n.tokenizer = self.tokenizer
        n.layer_idx = self.layer_idx
        n.tokenizer_options = self.tokenizer_options.copy()
        n.use_clip_schedule = self.use_clip_schedule
        n.apply_hooks_to_conds = self.apply_hooks_to_conds
        return n

    def add_patches(self, patches, strength_patch=1.0, strength_model=1.0):
        return self.patcher.add_patches(patches, strength_patch, strength_model)

    def set_tokenizer_option(self, option_name, value):
        self.tokenizer_options[option_name] = value

    def clip_layer(self, layer_idx):
        self.layer_idx = layer_idx

    def tokenize(self, text, return_word_ids=False, **kwargs):
        return self.tokenizer.tokenize_with_weights(text, return_word_ids, **kwargs)

    def add_hooks_to_dict(self, pooled_dict):
        if self.apply_hooks_to_conds:
            pooled_dict["hooks"] = self.apply_hooks_to_conds
        return pooled_dict

    def load_model(self):
        comfy.model_management.load_models_gpu([self.patcher])
        return self.patcher

    def encode_from_tokens(self, tokens, return_pooled=False, return_dict=False):
        self.cond_stage_model.reset_clip_options()
        if self.layer_idx is not None:
            self.cond_stage_model.set_clip_options({"layer": self.layer_idx})
        self.load_model()  # the weights with their patches, as upstream's load puts them
        with torch.no_grad():
            cond, pooled = self.cond_stage_model.encode_token_weights(tokens)
        if return_dict:
            return self.add_hooks_to_dict({"cond": cond, "pooled_output": pooled})
        if return_pooled:
            return cond, pooled
        return cond

    def encode_from_tokens_scheduled(self, tokens, unprojected=False, add_dict={}, show_pbar=True):
        out = self.encode_from_tokens(tokens, return_pooled=False, return_dict=True)
        cond = out.pop("cond")
        return [[cond, {**out, **add_dict}]]

    def encode(self, text):
        return self.encode_from_tokens(self.tokenize(text))

    def get_key_patches(self):
        return self.patcher.get_key_patches()


def load_lora_for_models(model, clip, lora, strength_model, strength_clip):
    """As upstream's: each weight of `lora` ({weight's key: its diff}, our model of a LoRA's
    file) an adapter object, added as a patch to a clone of the MODEL and of the CLIP."""
    loaded = {key: comfy.weight_adapter.LoRAAdapter({key}, (diff,)) for key, diff in lora.items()}
    new_model = new_clip = None
    if model is not None:
        new_model = model.clone()
        new_model.add_patches(loaded, strength_model)
    if clip is not None:
        new_clip = clip.clone()
        new_clip.add_patches(loaded, strength_clip)
    return new_model, new_clip


class VAE:
    """As upstream's: its first stage model's shape found from the state dict's keys and
    shapes (or the config), the weights loaded from it, attributes set as it is built (some
    of them functions), a patcher over the model on the VAE's device."""

    def __init__(self, sd=None, device=None, config=None, dtype=None, metadata=None):
        self.memory_used_encode = lambda shape, dtype: 1767 * shape[2] * shape[3] * torch.finfo(dtype).bits // 8
        self.memory_used_decode = lambda shape, dtype: 2178 * shape[2] * shape[3] * 64 * torch.finfo(dtype).bits // 8
        self.process_input = lambda image: image * 2.0 - 1.0
        self.process_output = lambda image: torch.clamp((image + 1.0) / 2.0, min=0.0, max=1.0)
        self.downscale_ratio = 8
        self.upscale_ratio = 8
        self.output_channels = 3
        if config is None:
            self.latent_channels = sd["encoder.weight"].shape[0]
            self.first_stage_model = AutoencoderKL(embed_dim=self.latent_channels)
        else:
            self.first_stage_model = AutoencoderKL(**config["params"])
            self.latent_channels = self.first_stage_model.encoder.out_channels
        self.first_stage_model = self.first_stage_model.eval()
        self.first_stage_model.load_state_dict(sd, strict=False)
        self.device = comfy.model_management.GPU if device is None else device
        self.vae_dtype = torch.float32 if dtype is None else dtype
        self.first_stage_model.to(self.vae_dtype)
        self.output_device = comfy.model_management.CPU
        self.patcher = comfy.model_patcher.ModelPatcher(self.first_stage_model, load_device=self.device,
                                                        offload_device=comfy.model_management.CPU)

    def encode(self, pixel_samples):
        memory_used = self.memory_used_encode(pixel_samples.movedim(-1, 1).shape, self.vae_dtype)
        comfy.model_management.load_models_gpu([self.patcher], memory_required=memory_used)
        with torch.no_grad():
            pixels = self.process_input(pixel_samples.movedim(-1, 1)).to(self.vae_dtype)
            return self.first_stage_model.encoder(pixels).to(self.output_device).float()

    def decode(self, samples_in, vae_options={}):
        memory_used = self.memory_used_decode(samples_in.shape, self.vae_dtype)
        comfy.model_management.load_models_gpu([self.patcher], memory_required=memory_used)
        with torch.no_grad():
            out = self.first_stage_model.decoder(samples_in.to(self.vae_dtype)).to(self.output_device).float()
            return self.process_output(out).movedim(1, -1)

    def encode_tiled(self, pixel_samples, tile_x=None, tile_y=None, overlap=None, tile_t=None, overlap_t=None):
        """As upstream's: tiles in two layouts (one tile each here), added in place into
        what the first made, which is an inference tensor."""
        comfy.model_management.load_models_gpu([self.patcher])
        pixels = pixel_samples.movedim(-1, 1)
        encode_fn = lambda a: self.first_stage_model.encoder(self.process_input(a).to(self.vae_dtype)).float()
        samples = comfy.utils.tiled_scale(pixels, encode_fn, upscale_amount=1 / self.downscale_ratio,
                                          out_channels=self.latent_channels, output_device=self.output_device)
        samples += comfy.utils.tiled_scale(pixels, encode_fn, upscale_amount=1 / self.downscale_ratio,
                                           out_channels=self.latent_channels, output_device=self.output_device)
        samples /= 2.0
        return samples

    def decode_tiled(self, samples, tile_x=None, tile_y=None, overlap=None, tile_t=None, overlap_t=None):
        return self.decode(samples)

    def spacial_compression_encode(self):
        return self.downscale_ratio

    def spacial_compression_decode(self):
        return self.upscale_ratio


def seeded_vae_state_dict():
    """A checkpoint's VAE weights, as our checkpoints have none: drawn from a seed."""
    torch.manual_seed(2)
    return AutoencoderKL().state_dict()


def load_checkpoint_guess_config(ckpt_path, output_vae=True, output_clip=True, output_clipvision=False,
                                 embedding_directory=None, output_model=True, model_options={}, te_model_options={}):
    """A small model of each kind, whatever the path: (MODEL, CLIP, VAE, CLIP_VISION)."""
    import comfy.model_base
    torch.manual_seed(0)
    model = comfy.model_base.model_from_config({"channels": 4, "dim": 32, "context_dim": 16, "heads": 4})
    patcher = comfy.model_patcher.ModelPatcher(model, comfy.model_management.GPU, comfy.model_management.CPU)
    return (patcher, _clip(embedding_directory, te_model_options) if output_clip else None,
            VAE(sd=seeded_vae_state_dict()) if output_vae else None, None)


def _clip(embedding_directory, model_options):
    """The checkpoint's CLIP, as upstream's loader builds it from the model's ClipTarget."""
    target = comfy.supported_models_base.ClipTarget(comfy.sd1_clip.SD1Tokenizer, comfy.sd1_clip.SD1ClipModel)
    target.params["width"] = 16
    torch.manual_seed(1)
    return CLIP(target, embedding_directory=embedding_directory, tokenizer_data={"clip_l_max_length": 8},
                model_options=model_options)
