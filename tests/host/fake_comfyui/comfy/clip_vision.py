"""Our model of upstream's comfy/clip_vision.py: clip_preprocess (an IMAGE to the model's
pixel values, with upstream's signature), ClipVisionModel(json_config), which reads its
model's configuration from a JSON file, keeps the image size, mean and std of it and builds
the class IMAGE_ENCODERS names for its model type with upstream's arguments (as upstream's
__init__ sets them, a replica sets them without it), and load(), which upstream's
CLIPVisionLoader calls; its weights are drawn from a seeded generator (there are no
checkpoints here), the same for the same name in any process."""

import json
import os
import zlib

import torch

from . import clip_model, model_management
from .model_patcher import ModelPatcher


def clip_preprocess(image, size=224, mean=(0.48145466, 0.4578275, 0.40821073),
                    std=(0.26862954, 0.26130258, 0.27577711), crop=True):
    image = image[:, :, :, :3].movedim(-1, 1)
    if image.shape[2] != size or image.shape[3] != size:
        image = torch.nn.functional.interpolate(image, size=(size, size), mode="bilinear", align_corners=False)
    image = torch.clip(255.0 * image, 0, 255).round() / 255.0
    mean = torch.tensor(mean, dtype=image.dtype).view(3, 1, 1)
    std = torch.tensor(std, dtype=image.dtype).view(3, 1, 1)
    return (image - mean) / std


IMAGE_ENCODERS = {"clip_vision_model": clip_model.CLIPVisionModelProjection}


class ClipVisionModel:
    def __init__(self, json_config):
        with open(json_config) as source:
            config = json.load(source)
        self.image_size = config.get("image_size", 224)
        self.image_mean = config.get("image_mean", [0.48145466, 0.4578275, 0.40821073])
        self.image_std = config.get("image_std", [0.26862954, 0.26130258, 0.27577711])
        self.return_all_hidden_states = False
        self.load_device = torch.device("cpu")
        offload_device = torch.device("cpu")
        self.dtype = torch.float32
        model_class = IMAGE_ENCODERS.get(config.get("model_type", "clip_vision_model"))
        self.model = model_class(config, self.dtype, offload_device, None)
        self.model.eval()
        self.patcher = ModelPatcher(self.model, load_device=self.load_device, offload_device=offload_device)

    def load_sd(self, sd):
        return self.model.load_state_dict(sd, strict=False)

    def get_sd(self):
        return self.model.state_dict()

    def encode_image(self, image, crop=True):
        model_management.load_models_gpu([self.patcher])
        pixel_values = clip_preprocess(image, size=self.image_size, mean=self.image_mean, std=self.image_std,
                                       crop=crop).float()
        out = self.model(pixel_values=pixel_values, intermediate_output=-2)
        return {"last_hidden_state": out[0], "image_embeds": out[2], "penultimate_hidden_states": out[1]}


def load(ckpt_path):
    model = ClipVisionModel(os.path.join(os.path.dirname(os.path.realpath(__file__)), "clip_vision_config_tiny.json"))
    generator = torch.Generator().manual_seed(zlib.crc32(str(ckpt_path).encode()))
    model.load_sd({key: torch.randn(value.shape, generator=generator) * 0.1
                   for key, value in sorted(model.get_sd().items())})
    return model
