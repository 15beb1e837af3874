"""Our model of upstream's server.py, as far as packs and comfy_supervisor use it: the one
PromptServer instance, which client and node a prompt runs for, and send_sync, which
here keeps what it would send the browser (`sent`) for a test to read. It imports nodes
first, as upstream's does."""

import nodes  # noqa: F401 (upstream's server imports it, with its change to the module path)


class PromptServer:
    instance = None

    def __init__(self, loop=None):
        PromptServer.instance = self
        self.loop = loop
        self.client_id = None
        self.last_node_id = None
        self.sent = []

    def send_sync(self, event, data, sid=None):
        self.sent.append((event, data, sid))
