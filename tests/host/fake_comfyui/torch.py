"""Stand-in for the torch.cuda calls comfy_supervisor.comfyui makes (never reached on the CPU device)."""


class cuda:
    @staticmethod
    def memory_reserved(device):
        return 0

    @staticmethod
    def memory_allocated(device):
        return 0
