"""A stand-in for the one name of spandrel (a third-party library, not packaged for Debian)
that upstream's upscale nodes use: the descriptor its ModelLoader returns around an image
upscaler's torch module, with the attributes and calls upstream's ImageUpscaleWithModel
makes of it (`scale`, `model`, `to`, called on a BCHW tile)."""


class ImageModelDescriptor:
    def __init__(self, model, scale, input_channels=3, output_channels=3):
        self.model = model
        self.scale = scale
        self.input_channels = input_channels
        self.output_channels = output_channels

    def to(self, device):
        self.model.to(device)
        return self

    def __call__(self, image):
        return self.model(image)
