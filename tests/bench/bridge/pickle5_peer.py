"""The careful Python transport scripts/bench bridge compares the bridge with, in the same
run: what a Python project that moves tensors between two processes would write in about
fifty lines, and the bar the issue set the bridge (docs/BENCHMARKS.md, "Against a careful
Python transport").

- One multiprocessing.shared_memory segment per direction, made once, large enough for the
  biggest payload; a Unix socket carries the messages.
- A value is pickled with protocol 5 and its buffers out of band (a tensor as the numpy
  array over its storage): each buffer is copied once into the sender's segment, and the
  pickle itself, with where each buffer lies, is the message. The receiver unpickles over
  views of the segment, so its tensor is over the sender's segment, not a copy.

So a round trip of an echo makes two copies: the sender's into its segment, and the echo's
of what it received into its own. Each side's tensors are over segments the other writes
again at the next message; a real transport would need to copy or to lend, which this one,
the fastest a careful peer can be, leaves out.

The copy-matched echo (`echo_peer(..., by_reference=True)`) sends back the description of
what it received instead (the pickle and where its buffers lie, in the sender's own
segment), as the bridge's echo returns a tensor it was lent: one copy per round trip, the
sender's."""

import os
import pickle
import socket
import struct
from multiprocessing import shared_memory

import torch

_LENGTH = struct.Struct("<Q")
_ALIGN = 64


class Pickle5Peer:
    def __init__(self, sock, own, theirs):
        self.sock = sock
        self.own = own        # the segment this side writes
        self.theirs = theirs  # the segment the other side writes

    def send(self, tensor):
        buffers = []
        data = pickle.dumps(tensor.numpy(), protocol=5, buffer_callback=buffers.append)
        layout, offset = [], 0
        for buffer in buffers:
            raw = buffer.raw()
            self.own.buf[offset:offset + raw.nbytes] = raw
            layout.append((offset, raw.nbytes))
            offset += (raw.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
        message = pickle.dumps((data, layout), protocol=5)
        self.sock.sendall(_LENGTH.pack(len(message)) + message)

    def receive_message(self):
        """The next message as it came, or None once the other side closed."""
        header = self.sock.recv(_LENGTH.size, socket.MSG_WAITALL)
        if len(header) < _LENGTH.size:
            return None
        return self.sock.recv(_LENGTH.unpack(header)[0], socket.MSG_WAITALL)

    def send_message(self, message):
        self.sock.sendall(_LENGTH.pack(len(message)) + message)

    def tensor_of(self, message, in_own=False):
        """The message's tensor, over the other side's segment (or, for a description sent
        back, over this side's own)."""
        data, layout = pickle.loads(message)
        segment = self.own if in_own else self.theirs
        return torch.from_numpy(pickle.loads(data, buffers=[segment.buf[o:o + n] for o, n in layout]))

    def receive(self, in_own=False):
        """The tensor of the next message, or None once the other side closed."""
        message = self.receive_message()
        return None if message is None else self.tensor_of(message, in_own)


def echo_peer(capacity, by_reference=False):
    """(the host's end, a function that ends the echo): a forked process that sends back
    each tensor it receives, as an echo node does: copied into its own segment, or, with
    `by_reference`, as the description of where it lies in the host's (receive it with
    in_own=True)."""
    ours, theirs = socket.socketpair()
    to_echo = shared_memory.SharedMemory(create=True, size=capacity)
    from_echo = shared_memory.SharedMemory(create=True, size=capacity)
    child = os.fork()
    if child == 0:
        ours.close()
        echo = Pickle5Peer(theirs, from_echo, to_echo)
        while (message := echo.receive_message()) is not None:
            tensor = echo.tensor_of(message)  # the echo node's input, over the host's segment
            if by_reference:
                echo.send_message(message)  # where it lies, in the host's own segment
            else:
                echo.send(tensor)
            del tensor
        os._exit(0)
    theirs.close()
    host = Pickle5Peer(ours, to_echo, from_echo)

    def finish():
        ours.close()
        os.waitpid(child, 0)
        for segment in (to_echo, from_echo):
            segment.close()
            segment.unlink()
    return host, finish
