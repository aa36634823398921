"""src.transfer: copy timings, allocation cost, the 2x2 runner, link speed."""
import time

import numpy as np
import pytest

from src import cp, cpx, transfer

KIB = 1024


@pytest.fixture
def stream():
    return cp.cuda.Stream(non_blocking=True)


def sleep_on(stream, seconds):
    """Keep ``stream`` busy for ``seconds`` (a host function in its queue)."""
    stream.launch_host_func(time.sleep, seconds)


# -- host memory --------------------------------------------------------------

def test_is_pinned_tells_pinned_from_pageable_memory():
    pinned = cpx.empty_pinned(1000, dtype=np.float32)
    assert transfer.is_pinned(pinned)
    assert transfer.is_pinned(pinned[10:20])
    assert not transfer.is_pinned(np.empty(1000, dtype=np.float32))


@pytest.mark.parametrize("pinned", [False, True])
def test_host_buffer_is_touched_bytes_of_the_asked_kind(pinned):
    a = transfer.host_buffer(64 * KIB, pinned)
    assert a.dtype == np.uint8 and a.shape == (64 * KIB,)
    assert transfer.is_pinned(a) == pinned
    assert (a == 1).all()


def test_allocation_times_measures_the_three_kinds():
    times = transfer.allocation_times(256 * KIB, repeat=2)
    assert list(times) == ["pageable", "pinned, new", "pinned, pooled"]
    assert all(t > 0 for t in times.values())


# -- bandwidth ----------------------------------------------------------------

@pytest.mark.parametrize("pinned", [False, True])
def test_time_copy_moves_the_data_both_ways(stream, pinned):
    host = transfer.host_buffer(32 * KIB, pinned)
    host[:] = np.arange(host.size) % 251
    dev = cp.zeros(host.size, dtype=cp.uint8)
    cp.cuda.Stream.null.synchronize()   # the fill must not land after the copy
    t = transfer.time_copy(host, dev, "H2D", stream, repeat=2)
    assert (dev.get() == host).all()
    assert (t.nbytes, t.direction, t.pinned) == (host.nbytes, "H2D", pinned)
    host[:] = 0
    transfer.time_copy(host, dev, "D2H", stream, repeat=2)
    assert (host == np.arange(host.size) % 251).all()


def test_copy_time_bandwidth_is_bytes_per_second_over_1e9():
    t = transfer.CopyTime(2_000_000, "H2D", True, event_s=0.001, host_s=0.002)
    assert t.event_gbps == pytest.approx(2.0)


def test_time_copy_rejects_an_unknown_direction(stream):
    with pytest.raises(ValueError, match="direction"):
        transfer.time_copy(np.zeros(4, np.uint8), cp.zeros(4, cp.uint8),
                           "D2D", stream)


def test_bandwidth_sweep_covers_each_size_direction_and_memory():
    sizes = [KIB, 4 * KIB]
    results = transfer.bandwidth_sweep(sizes, repeat=1)
    keys = {(r.nbytes, r.direction, r.pinned) for r in results}
    assert keys == {(n, d, p) for n in sizes for d in ("H2D", "D2H")
                    for p in (False, True)}
    assert all(r.event_s > 0 and r.host_s > 0 for r in results)


def test_returns_and_done_separates_the_call_from_the_work(stream):
    returns, done = transfer.returns_and_done(
        lambda: sleep_on(stream, 0.05), stream, repeat=2)
    assert done >= 0.05
    assert returns < 0.025


# -- the 2x2 experiment -------------------------------------------------------

def slow_model(x):
    """One kernel, with the stream held busy for 50 ms before it."""
    sleep_on(cp.cuda.get_current_stream(), 0.05)
    return x.sum()


def test_pinned_non_blocking_copy_frees_the_host_at_once():
    x = cpx.empty_pinned(1000, dtype=np.float32)
    step = transfer.copy_then_compute(x, slow_model, lambda: None,
                                      blocking=False, repeat=2)
    assert step.blocked_s < 0.025
    assert step.total_s >= 0.05


def test_consuming_first_holds_the_host_until_the_model_is_done():
    x = cpx.empty_pinned(1000, dtype=np.float32)
    step = transfer.copy_then_compute(x, slow_model, lambda: None,
                                      blocking=False, consume_first=True,
                                      repeat=2)
    assert step.blocked_s >= 0.05


def test_two_by_two_runs_four_cells_with_cupys_call_for_each():
    pageable = np.ones(1000, dtype=np.float32)
    pinned = cpx.empty_pinned(1000, dtype=np.float32)
    rows = transfer.two_by_two(pageable, pinned, lambda x: x.sum(),
                               lambda: None, repeat=1)
    assert [(m, b, call) for m, b, call, _ in rows] == [
        ("pageable", True, "cp.asarray(x_pageable, blocking=True)"),
        ("pageable", False, "cp.asarray(x_pageable, blocking=False)"),
        ("pinned", True, "cp.asarray(x_pinned, blocking=True)"),
        ("pinned", False, "cp.asarray(x_pinned, blocking=False)"),
    ]
    assert all(s.total_s >= s.blocked_s > 0 for *_, s in rows)


# -- what arrived -------------------------------------------------------------

@pytest.mark.parametrize("got, expected", [
    ([1, 1, 1], "the original"),
    ([2, 2, 2], "the overwritten"),
    ([2, 1, 1], "a mix of both"),
    ([0, 1, 2], "neither"),
])
def test_arrived_names_the_data_a_copy_delivered(got, expected):
    original, overwritten = np.ones(3), np.full(3, 2.0)
    assert transfer.arrived(np.array(got, float), original,
                            overwritten) == expected


# -- the link -----------------------------------------------------------------

@pytest.mark.parametrize("speed, width, gbps", [
    ("2.5 GT/s PCIe", "1", 0.25),                    # PCIe 1.0 x1
    ("8.0 GT/s PCIe", "16", 8 * 16 * 128 / 130 / 8),  # PCIe 3.0 x16
    ("32.0 GT/s PCIe\n", "16\n", 32 * 16 * 128 / 130 / 8),
    ("64.0 GT/s PCIe", "16", 64 * 16 * 242 / 256 / 8),
])
def test_pcie_bandwidth_from_link_speed_and_width(speed, width, gbps):
    assert transfer.pcie_bandwidth(speed, width) == pytest.approx(gbps * 1e9)


def fake_properties(integrated):
    def props(device):
        return {"integrated": integrated, "pciDomainID": 0,
                "pciBusID": 0x65, "pciDeviceID": 0}
    return props


def test_nominal_link_bandwidth_reads_sysfs_at_the_devices_address(
        tmp_path, monkeypatch):
    link = tmp_path / "0000:65:00.0"
    link.mkdir()
    (link / "max_link_speed").write_text("16.0 GT/s PCIe\n")
    (link / "max_link_width").write_text("16\n")
    monkeypatch.setattr(cp.cuda.runtime, "getDeviceProperties",
                        fake_properties(0))
    assert transfer.nominal_link_bandwidth(0, sysfs=tmp_path) == \
        pytest.approx(16 * 16 * 128 / 130 / 8 * 1e9)


def gpu_behind_port(tmp_path, gpu, port):
    """sysfs as Linux lays it out: ``devices/0000:65:00.0`` a link to the
    GPU's directory, under its upstream port's; each ``(speed, width)``
    written as the port's maximum (None: no entry)."""
    port_dir = tmp_path / "sys" / "pci0000:64" / "0000:64:00.0"
    gpu_dir = port_dir / "0000:65:00.0"
    for where, link in ((port_dir, port), (gpu_dir, gpu)):
        where.mkdir(parents=True, exist_ok=True)
        if link is not None:
            (where / "max_link_speed").write_text(f"{link[0]} GT/s PCIe\n")
            (where / "max_link_width").write_text(f"{link[1]}\n")
    devices = tmp_path / "devices"
    devices.mkdir()
    (devices / "0000:65:00.0").symlink_to(gpu_dir)
    return devices


@pytest.mark.parametrize("gpu, port, gts, lanes", [
    (("32.0", 16), ("16.0", 16), 16, 16),   # a PCIe 5 GPU in a PCIe 4 slot
    (("32.0", 16), ("32.0", 8), 32, 8),     # a x16 GPU in a x8 slot
    (("16.0", 16), ("32.0", 16), 16, 16),   # the GPU is the slower end
    (("32.0", 16), None, 32, 16),           # no port entry: the GPU's own
])
def test_the_nominal_link_is_the_slower_ends_maximum(
        tmp_path, monkeypatch, gpu, port, gts, lanes):
    """A link trains to what both ends can do: the lesser of the GPU's and
    its upstream port's maximum, as nvidia-smi's pcie.link.gen.max; never
    the current link, which an idle GPU trains down."""
    sysfs = gpu_behind_port(tmp_path, gpu, port)
    monkeypatch.setattr(cp.cuda.runtime, "getDeviceProperties",
                        fake_properties(0))
    assert transfer.nominal_link_bandwidth(0, sysfs=sysfs) == \
        pytest.approx(gts * lanes * 128 / 130 / 8 * 1e9)


def test_no_link_bandwidth_without_sysfs_entry_or_for_integrated_device(
        tmp_path, monkeypatch):
    monkeypatch.setattr(cp.cuda.runtime, "getDeviceProperties",
                        fake_properties(0))
    assert transfer.nominal_link_bandwidth(0, sysfs=tmp_path) is None
    monkeypatch.setattr(cp.cuda.runtime, "getDeviceProperties",
                        fake_properties(1))
    assert transfer.nominal_link_bandwidth(0, sysfs=tmp_path) is None


# -- sizes --------------------------------------------------------------------

def test_log2_sizes_are_powers_of_two_from_smallest_to_largest():
    assert transfer.log2_sizes(KIB, 8 * KIB) == [KIB, 2 * KIB, 4 * KIB,
                                                 8 * KIB]


@pytest.mark.parametrize("nbytes, text", [
    (512, "512 B"), (KIB, "1 KiB"), (1536, "1.5 KiB"),
    (64 * 2**20, "64 MiB"), (2**31, "2 GiB"),
])
def test_size_label_uses_binary_units(nbytes, text):
    assert transfer.size_label(nbytes) == text
