"""Our model of upstream's comfy/controlnet.py: a control net (ControlBase's cond hint,
strength, timestep range and previous control net; copy, set_cond_hint, get_control) that
turns its hint into residuals the diffusion model adds, scaled by its strength and
merged with the previous control net's, as upstream's ControlNet does."""

import torch

import comfy.model_management
import comfy.model_patcher


class ControlBase:
    def __init__(self):
        self.cond_hint_original = None
        self.cond_hint = None
        self.strength = 1.0
        self.timestep_percent_range = (0.0, 1.0)
        self.previous_controlnet = None
        self.vae = None
        self.extra_args = {}

    def set_cond_hint(self, cond_hint, strength=1.0, timestep_percent_range=(0.0, 1.0), vae=None, extra_concat=[]):
        self.cond_hint_original = cond_hint
        self.strength = strength
        self.timestep_percent_range = timestep_percent_range
        self.vae = vae
        return self

    def set_previous_controlnet(self, controlnet):
        self.previous_controlnet = controlnet
        return self

    def copy_to(self, c):
        c.cond_hint_original = self.cond_hint_original
        c.strength = self.strength
        c.timestep_percent_range = self.timestep_percent_range
        c.vae = self.vae

    def get_models(self):
        return self.previous_controlnet.get_models() if self.previous_controlnet is not None else []


class ControlModel(torch.nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.hint = torch.nn.Linear(3, dim)


class ControlNet(ControlBase):
    def __init__(self, control_model=None):
        super().__init__()
        torch.manual_seed(3)
        self.control_model = control_model if control_model is not None else ControlModel()
        self.control_model_wrapped = comfy.model_patcher.ModelPatcher(self.control_model, comfy.model_management.GPU,
                                                                      comfy.model_management.CPU)

    def copy(self):
        c = ControlNet(self.control_model)
        self.copy_to(c)
        return c

    def get_models(self):
        return super().get_models() + [self.control_model_wrapped]

    def get_control(self, x_noisy, t, cond, batched_number, transformer_options):
        previous = None
        if self.previous_controlnet is not None:
            previous = self.previous_controlnet.get_control(x_noisy, t, cond, batched_number, transformer_options)
        hint = self.cond_hint_original.mean(dim=(2, 3))  # [batch, 3] from a hint [batch, 3, h, w], as upstream has it
        tokens = x_noisy.shape[2] * x_noisy.shape[3]
        residual = self.control_model.hint(hint).unsqueeze(1).expand(-1, tokens, -1) * self.strength
        if previous is not None:
            residual = residual + previous["middle"][0]
        return {"input": [], "middle": [residual], "output": []}
