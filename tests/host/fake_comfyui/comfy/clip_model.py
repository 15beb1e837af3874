"""Our model of upstream's comfy/clip_model.py, as far as a CLIP vision model goes: upstream's
CLIPVisionModelProjection(config_dict, dtype, device, operations), a vision transformer
built from its JSON configuration, whose forward(pixel_values, intermediate_output) returns
upstream's four outputs (the last hidden state, the one asked for by intermediate_output,
the projected pooled output, and the llava projection, None here). Small: one patch
embedding, the configured number of layers, each an attention and an MLP."""

import torch


class _Layer(torch.nn.Module):
    def __init__(self, hidden, heads, intermediate, eps, dtype, device, operations):
        super().__init__()
        self.heads = heads
        self.layer_norm1 = operations.LayerNorm(hidden, eps=eps, dtype=dtype, device=device)
        self.qkv = operations.Linear(hidden, 3 * hidden, dtype=dtype, device=device)
        self.out_proj = operations.Linear(hidden, hidden, dtype=dtype, device=device)
        self.layer_norm2 = operations.LayerNorm(hidden, eps=eps, dtype=dtype, device=device)
        self.fc1 = operations.Linear(hidden, intermediate, dtype=dtype, device=device)
        self.fc2 = operations.Linear(intermediate, hidden, dtype=dtype, device=device)

    def forward(self, x):
        batch, tokens, hidden = x.shape
        q, k, v = self.qkv(self.layer_norm1(x)).view(batch, tokens, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v
        x = x + self.out_proj(attended.transpose(1, 2).reshape(batch, tokens, hidden))
        h = self.fc1(self.layer_norm2(x))
        return x + self.fc2(h * torch.sigmoid(1.702 * h))  # quick_gelu


class CLIPVisionModelProjection(torch.nn.Module):
    def __init__(self, config_dict, dtype, device, operations=None):
        super().__init__()
        operations = operations or torch.nn  # upstream's is comfy.ops.manual_cast, which our model has not
        hidden, patch = config_dict["hidden_size"], config_dict["patch_size"]
        eps = config_dict.get("layer_norm_eps", 1e-5)
        tokens = (config_dict["image_size"] // patch) ** 2 + 1
        self.patch_embedding = operations.Conv2d(config_dict["num_channels"], hidden, kernel_size=patch, stride=patch,
                                                 bias=False, dtype=dtype, device=device)
        self.class_embedding = torch.nn.Parameter(torch.empty(hidden, dtype=dtype, device=device))
        self.position_embedding = operations.Embedding(tokens, hidden, dtype=dtype, device=device)
        self.pre_layrnorm = operations.LayerNorm(hidden, eps=eps, dtype=dtype, device=device)
        self.layers = torch.nn.ModuleList(
            _Layer(hidden, config_dict["num_attention_heads"], config_dict["intermediate_size"], eps, dtype, device,
                   operations) for _ in range(config_dict["num_hidden_layers"]))
        self.post_layernorm = operations.LayerNorm(hidden, eps=eps, dtype=dtype, device=device)
        self.visual_projection = operations.Linear(hidden, config_dict["projection_dim"], bias=False, dtype=dtype,
                                                   device=device)

    def forward(self, pixel_values, intermediate_output=None):
        x = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_embedding.expand(x.shape[0], 1, -1), x], dim=1) + self.position_embedding.weight
        x = self.pre_layrnorm(x)
        hidden = []
        for layer in self.layers:
            x = layer(x)
            hidden.append(x)
        intermediate = hidden[intermediate_output] if isinstance(intermediate_output, int) else None
        pooled = self.post_layernorm(x[:, 0])
        return x, intermediate, self.visual_projection(pooled), None
