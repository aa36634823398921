"""The experiments' registry: each experiment runs once and returns its raw
numbers; the effects read them."""
import functools

from src import cp


def free_pools():
    """Give back the memory an experiment's pools kept (the model's device
    is 1 GiB, and the next experiment's arrays must fit)."""
    import gc
    gc.collect()
    sync()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def sync():
    cp.cuda.Device().synchronize()


EXPERIMENTS = {}


def experiment(fn):
    """Register ``fn() -> {name: number}``, run at most once per process."""
    cached = functools.cache(fn)
    EXPERIMENTS[fn.__name__] = cached
    return cached
