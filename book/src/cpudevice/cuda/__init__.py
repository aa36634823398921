"""``cupy.cuda`` on the CPU device model."""
from . import runtime, memory, stream, graph, pinned_memory, memory_hook  # noqa
from . import allocator, memory_async, managed  # noqa  (cupy.cuda.memory's)
from . import handles  # noqa  (streams by handle: cupy.cuda.stream's)
from .allocator import (Memory, alloc, get_allocator, set_allocator,
                        using_allocator)
from .device import Device, get_device_id
from .managed import ManagedMemory, malloc_managed
from .memory import (BaseMemory, MemoryPointer, MemoryPool, OutOfMemoryError,
                     UnownedMemory)
from .memory_async import MemoryAsync, MemoryAsyncPool, malloc_async
from .memory_hook import MemoryHook
from .pinned_memory import (PinnedMemory, PinnedMemoryPointer,
                            PinnedMemoryPool, alloc_pinned_memory)
from .handles import ExternalStream
from .stream import (Event, Stream, get_current_stream, get_elapsed_time)

__all__ = ["BaseMemory", "Device", "Event", "ExternalStream",
           "ManagedMemory", "Memory", "MemoryAsync", "MemoryAsyncPool",
           "MemoryHook", "MemoryPointer", "MemoryPool", "OutOfMemoryError",
           "PinnedMemory", "PinnedMemoryPointer", "PinnedMemoryPool",
           "Stream", "UnownedMemory", "alloc", "alloc_pinned_memory",
           "get_allocator", "get_current_stream", "get_device_id",
           "get_elapsed_time", "graph", "malloc_async", "malloc_managed",
           "memory", "memory_hook", "pinned_memory", "runtime",
           "set_allocator", "stream", "using_allocator"]
