"""Our model of upstream's comfy/model_base.py for a small diffusion model: BaseModel wraps
a diffusion_model (a torch module) with its model_sampling and latent format, and
apply_model scales the input, runs the diffusion model with the conditioning, the control
net's residuals and the transformer options, and turns its output into the denoised
latent, as upstream's does. The diffusion model's transformer block calls the patches of
transformer_options as upstream's BasicTransformerBlock does (attn2_patch,
patches_replace["attn2"], attn2_output_patch), with the same arguments."""

import enum

import torch

from . import conds, model_sampling


class CrossAttention(torch.nn.Module):
    def __init__(self, dim, context_dim, heads, device=None):
        super().__init__()
        self.heads = heads
        self.to_q = torch.nn.Linear(dim, dim, bias=False, device=device)
        self.to_k = torch.nn.Linear(context_dim, dim, bias=False, device=device)
        self.to_v = torch.nn.Linear(context_dim, dim, bias=False, device=device)
        self.to_out = torch.nn.Linear(dim, dim, device=device)

    def attention(self, q, k, v):
        b, n, d = q.shape
        h = self.heads
        q, k, v = (t.reshape(b, -1, h, d // h).transpose(1, 2) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, d)

    def forward(self, x, context, value=None):
        return self.to_out(self.attention(self.to_q(x), self.to_k(context), self.to_v(value if value is not None
                                                                                     else context)))


class TransformerBlock(torch.nn.Module):
    def __init__(self, dim, context_dim, heads, device=None):
        super().__init__()
        self.n_heads, self.d_head = heads, dim // heads
        self.norm2 = torch.nn.LayerNorm(dim, device=device)
        self.attn2 = CrossAttention(dim, context_dim, heads, device=device)
        self.ff = torch.nn.Linear(dim, dim, device=device)

    def forward(self, x, context, transformer_options):
        patches = transformer_options.get("patches", {})
        replace = transformer_options.get("patches_replace", {})
        extra_options = {k: v for k, v in transformer_options.items() if k not in ("patches", "patches_replace")}
        extra_options["n_heads"], extra_options["dim_head"] = self.n_heads, self.d_head
        extra_options["attn_precision"] = None
        block = transformer_options.get("block")
        n = self.norm2(x)
        context_attn2, value_attn2 = context, None
        if "attn2_patch" in patches:
            value_attn2 = context_attn2
            for p in patches["attn2_patch"]:
                n, context_attn2, value_attn2 = p(n, context_attn2, value_attn2, extra_options)
        attn2_replace = replace.get("attn2", {})
        if block in attn2_replace:
            if value_attn2 is None:
                value_attn2 = context_attn2
            n = self.attn2.to_q(n)
            context_attn2 = self.attn2.to_k(context_attn2)
            value_attn2 = self.attn2.to_v(value_attn2)
            n = self.attn2.to_out(attn2_replace[block](n, context_attn2, value_attn2, extra_options))
        else:
            n = self.attn2(n, context_attn2, value_attn2)
        for p in patches.get("attn2_output_patch", []):
            n = p(n, extra_options)
        x = n + x
        return self.ff(x) + x


class TinyUNet(torch.nn.Module):
    """A diffusion model small enough for the CPU: a projection in, one transformer block at
    ("middle", 0), a projection out; control residuals added after the block."""

    def __init__(self, channels=4, dim=32, context_dim=16, heads=4, device=None):
        super().__init__()
        self.proj_in = torch.nn.Linear(channels, dim, device=device)
        self.time_embed = torch.nn.Linear(1, dim, device=device)
        self.block = TransformerBlock(dim, context_dim, heads, device=device)
        self.proj_out = torch.nn.Linear(dim, channels, device=device)

    def forward(self, x, timesteps, context, control=None, transformer_options={}):
        b, c, h, w = x.shape
        tokens = self.proj_in(x.permute(0, 2, 3, 1).reshape(b, h * w, c))
        tokens = tokens + self.time_embed(timesteps.float().view(b, 1, 1) / 1000.0)
        options = dict(transformer_options)
        options["block"] = ("middle", 0)
        tokens = self.block(tokens, context, options)
        if control is not None:
            for residual in control.get("middle", []):
                if residual is not None:
                    tokens = tokens + residual
        return self.proj_out(tokens).reshape(b, h, w, c).permute(0, 3, 1, 2)


class ModelType(enum.Enum):
    EPS = 1


class ModelSampling(model_sampling.ModelSamplingDiscrete, model_sampling.EPS):
    pass


class BaseModel(torch.nn.Module):
    """As upstream's: built from its model config, its diffusion model made by `unet_model`
    from the config's unet_config on `device`."""

    def __init__(self, model_config, model_type=ModelType.EPS, device=None, unet_model=None):
        super().__init__()
        if unet_model is None:
            from comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel as unet_model
        self.model_config = model_config
        self.latent_format = model_config.latent_format
        self.manual_cast_dtype = model_config.manual_cast_dtype
        self.device = device
        self.current_patcher = None
        self.diffusion_model = unet_model(**model_config.unet_config, device=device)
        self.model_sampling = ModelSampling()
        self.model_type = model_type

    def get_dtype(self):
        return self.diffusion_model.proj_in.weight.dtype

    def apply_model(self, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
        sigma = t
        xc = self.model_sampling.calculate_input(sigma, x)
        timestep = self.model_sampling.timestep(t).float()
        out = self.diffusion_model(xc, timestep, c_crossattn, control=control,
                                   transformer_options=transformer_options)
        return self.model_sampling.calculate_denoised(sigma, out, x)

    def extra_conds(self, **kwargs):
        """The comfy.conds values the model takes from a conditioning, as upstream's makes
        them: its cross attention, pooled output, concat latent, reference latents, and the
        batch's size as a constant."""
        out = {}
        if kwargs.get("cross_attn") is not None:
            out["c_crossattn"] = conds.CONDCrossAttn(kwargs["cross_attn"])
        if kwargs.get("pooled_output") is not None:
            out["y"] = conds.CONDRegular(kwargs["pooled_output"])
        if kwargs.get("concat_latent_image") is not None:
            out["c_concat"] = conds.CONDNoiseShape(kwargs["concat_latent_image"])
        if kwargs.get("reference_latents") is not None:
            out["ref_latents"] = conds.CONDList(list(kwargs["reference_latents"]))
        out["batch_frames"] = conds.CONDConstant(kwargs["noise"].shape[0])
        return out

    def process_latent_in(self, latent):
        return self.latent_format.process_in(latent)

    def process_latent_out(self, latent):
        return self.latent_format.process_out(latent)

    def memory_required(self, input_shape):
        return 0


def model_from_config(unet_config, device=None):
    """A BaseModel of our SD15 configuration over `unet_config`, as upstream's loaders build
    one from the configuration their detection chose."""
    from comfy import supported_models
    return BaseModel(supported_models.SD15(dict(unet_config)), device=device)
