"""``cupy.cuda`` on the CPU device model."""
from . import runtime, memory, stream, graph, pinned_memory, memory_hook  # noqa
from .device import Device, get_device_id
from .memory import MemoryPointer, MemoryPool, OutOfMemoryError, alloc
from .memory_hook import MemoryHook
from .pinned_memory import (PinnedMemory, PinnedMemoryPointer,
                            PinnedMemoryPool, alloc_pinned_memory)
from .stream import (Event, Stream, get_current_stream, get_elapsed_time)

__all__ = ["Device", "Event", "MemoryHook", "MemoryPointer", "MemoryPool",
           "OutOfMemoryError", "PinnedMemory", "PinnedMemoryPointer",
           "PinnedMemoryPool", "Stream", "alloc", "alloc_pinned_memory",
           "get_current_stream", "get_device_id", "get_elapsed_time",
           "graph", "memory", "memory_hook", "pinned_memory", "runtime",
           "stream"]
