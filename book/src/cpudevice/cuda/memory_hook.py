"""``cupy.cuda.MemoryHook``: callbacks around the pool's allocations.

As in CuPy, hooks are registered per thread with ``with hook:`` and called
with keyword arguments: ``alloc_*`` (device_id, mem_size, mem_ptr) when the
pool takes memory from the device, ``malloc_*`` (device_id, size, mem_size,
mem_ptr, pmem_id) for every allocation, ``free_*`` (device_id, mem_size,
mem_ptr, pmem_id) when a block returns to the pool.
"""
import collections
import threading

class _HookTLS(threading.local):
    hooks = None                # this thread's hooks, by name


_tls = _HookTLS()


def get_memory_hooks():
    hooks = _tls.hooks
    if hooks is None:
        hooks = _tls.hooks = collections.OrderedDict()
    return hooks


def _hooks():
    """The registered hooks of this thread, or None (the fast path)."""
    return _tls.hooks or None


class MemoryHook:
    """Base class of memory hooks; override the callbacks you need."""

    name = "MemoryHook"

    def __enter__(self):
        hooks = get_memory_hooks()
        if self.name in hooks:
            raise KeyError("memory hook %s already exists" % self.name)
        hooks[self.name] = self
        return self

    def __exit__(self, *_):
        del get_memory_hooks()[self.name]

    def alloc_preprocess(self, **kwargs):
        pass

    def alloc_postprocess(self, **kwargs):
        pass

    def malloc_preprocess(self, **kwargs):
        pass

    def malloc_postprocess(self, **kwargs):
        pass

    def free_preprocess(self, **kwargs):
        pass

    def free_postprocess(self, **kwargs):
        pass
