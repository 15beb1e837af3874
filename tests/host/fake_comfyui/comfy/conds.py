"""Our model of upstream's comfy/conds.py: the conditioning values BaseModel.extra_conds makes
of a CONDITIONING for its model, each holding one field, `cond`, that the sampler batches
every step: process_cond (repeated to the batch, or cut to an area for the noise-shaped
one), can_concat, concat and size, with upstream's names and signatures."""

import math

import torch


def repeat_to_batch_size(tensor, batch_size):
    if tensor.shape[0] > batch_size:
        return tensor[:batch_size]
    if tensor.shape[0] < batch_size:
        return tensor.repeat([math.ceil(batch_size / tensor.shape[0])] + [1] * (len(tensor.shape) - 1))[:batch_size]
    return tensor


class CONDRegular:
    def __init__(self, cond):
        self.cond = cond

    def _copy_with(self, cond):
        return self.__class__(cond)

    def process_cond(self, batch_size, **kwargs):
        return self._copy_with(repeat_to_batch_size(self.cond, batch_size))

    def can_concat(self, other):
        return self.cond.shape == other.cond.shape and self.cond.device == other.cond.device

    def concat(self, others):
        return torch.cat([self.cond] + [other.cond for other in others])

    def size(self):
        return list(self.cond.size())


class CONDNoiseShape(CONDRegular):
    """A latent-shaped value (an inpainting model's concat latent): cut to the area sampled."""

    def process_cond(self, batch_size, area=None, **kwargs):
        data = self.cond
        if area is not None:
            dims = len(area) // 2
            for i in range(dims):
                data = data.narrow(i + 2, area[i + dims], area[i])
        return self._copy_with(repeat_to_batch_size(data, batch_size))


class CONDCrossAttn(CONDRegular):
    """The cross attention's context: two of different lengths concatenate, the shorter repeated."""

    def can_concat(self, other):
        s1, s2 = self.cond.shape, other.cond.shape
        if s1 != s2:
            if s1[0] != s2[0] or s1[2] != s2[2]:
                return False
            if math.lcm(s1[1], s2[1]) // min(s1[1], s2[1]) > 4:
                return False
        return self.cond.device == other.cond.device

    def concat(self, others):
        conds = [self.cond] + [other.cond for other in others]
        length = math.lcm(*(c.shape[1] for c in conds))
        return torch.cat([c.repeat(1, length // c.shape[1], 1) if c.shape[1] < length else c for c in conds])


class CONDConstant(CONDRegular):
    """A plain value the same for the whole batch (a video model's frame count)."""

    def process_cond(self, batch_size, **kwargs):
        return self._copy_with(self.cond)

    def can_concat(self, other):
        return self.cond == other.cond

    def concat(self, others):
        return self.cond

    def size(self):
        return [1]


class CONDList(CONDRegular):
    """A list of tensors (a model's reference latents), each batched alone."""

    def process_cond(self, batch_size, **kwargs):
        return self._copy_with([repeat_to_batch_size(c, batch_size) for c in self.cond])

    def can_concat(self, other):
        return len(self.cond) == len(other.cond) and all(a.shape == b.shape for a, b in zip(self.cond, other.cond))

    def concat(self, others):
        return [torch.cat([c] + [other.cond[i] for other in others]) for i, c in enumerate(self.cond)]

    def size(self):
        total = sum(math.prod(c.size()) for c in self.cond)
        width = self.cond[-1].size()[1] if self.cond and len(self.cond[-1].size()) > 1 else 1
        return [1, width, total // width]
