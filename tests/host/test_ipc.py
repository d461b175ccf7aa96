"""Objects through shared memory between processes (moagcn.host.parallel.ipc)."""
from __future__ import annotations

import mmap
import multiprocessing
import os
import socket
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from moagcn.host.parallel import ipc


@dataclass
class Box:
    name: str
    arrays: list
    matrix: object
    extra: dict


def sample_object(seed: int = 0) -> Box:
    rng = np.random.default_rng(seed)
    big = rng.random((300, 97), dtype=np.float32)             # 116 kB: out of band
    return Box(
        name="batch",
        arrays=[big,
                rng.integers(0, 1 << 40, 50_000, dtype=np.int64),   # 400 kB
                np.arange(7, dtype=np.int32),                      # small: in band
                np.zeros((0, 5), dtype=np.float32),                # empty
                big[::3, 1:],                                      # not contiguous
                np.asfortranarray(rng.random((200, 60)))],         # Fortran order
        matrix=sp.random(2000, 500, density=0.02, format="csr", random_state=seed,
                         dtype=np.float32),
        extra={"salt": (1, 2), "none": None})


def check_equal(got: Box, want: Box) -> None:
    assert got.name == want.name and got.extra == want.extra
    assert len(got.arrays) == len(want.arrays)
    for a, b in zip(got.arrays, want.arrays):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)
    assert (got.matrix != want.matrix).nnz == 0
    assert got.matrix.dtype == want.matrix.dtype


def memory_of(a: np.ndarray):
    """What holds the memory of array ``a`` (through its bases and a memoryview's object)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a.obj if isinstance(a, memoryview) else a


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_pack_unpack_gives_the_same_object_with_large_arrays_shared_not_copied():
    obj = sample_object()
    header, fd = ipc.pack(obj)
    assert fd is not None
    # in the pickle: the small parts and the one array that is not contiguous (numpy copies
    # those in band); the large contiguous arrays and the matrix's are not
    assert len(header) < 16_000 + obj.arrays[4].nbytes
    got = ipc.unpack(header, fd)
    check_equal(got, obj)
    # the large arrays are views of the shared mapping, the small ones are not
    assert [isinstance(memory_of(a), mmap.mmap) for a in got.arrays] == \
        [True, True, False, False, False, True]


def test_an_object_without_large_buffers_needs_no_file():
    header, fd = ipc.pack({"a": np.arange(10), "b": "text"})
    assert fd is None
    got = ipc.unpack(header, fd)
    assert got["b"] == "text" and np.array_equal(got["a"], np.arange(10))


def test_short_writes_are_resumed(monkeypatch):
    """``writev`` may write less than asked: the rest follows, in order."""
    real = os.writev

    def short(fd, bufs):
        return real(fd, [bytes(bufs[0])[:1000]])          # at most 1000 bytes per call
    monkeypatch.setattr(os, "writev", short)
    obj = sample_object(1)
    check_equal(ipc.unpack(*ipc.pack(obj)), obj)


def test_send_recv_through_a_socket_leaks_no_descriptors():
    a, b = socket.socketpair()
    try:
        before = open_fds()
        for k in range(20):
            obj = sample_object(k)
            ipc.send(a, obj)
            check_equal(ipc.recv(b), obj)
        assert open_fds() == before
        a.close()
        with pytest.raises(EOFError):
            ipc.recv(b)
    finally:
        a.close()
        b.close()


def _child(sock, n):
    for k in range(n):
        ipc.send(sock, (k, sample_object(100 + k)))
    sock.close()


def test_objects_from_a_forked_process_arrive_in_order_and_outlive_it():
    a, b = socket.socketpair()
    p = multiprocessing.get_context("fork").Process(target=_child, args=(b, 5))
    p.start()
    b.close()
    got = [ipc.recv(a) for _ in range(5)]
    p.join(30)
    assert p.exitcode == 0
    with pytest.raises(EOFError):
        ipc.recv(a)
    a.close()
    # the sender is gone: the arrays still read what it wrote
    for k, (i, obj) in enumerate(got):
        assert i == k
        check_equal(obj, sample_object(100 + k))


def _reader(sock, out):
    """Read records from the shared ``sock`` until ``None``; report each one's number and
    whether it equals what was sent."""
    got = []
    while True:
        rec = ipc.recv_record(sock)
        if rec is None:
            break
        k, obj = rec
        try:
            check_equal(obj, sample_object(k % 4))
            got.append((k, True))
        except AssertionError:
            got.append((k, False))
    ipc.send(out, got)
    out.close()


def test_records_on_one_socket_reach_exactly_one_of_many_readers_whole():
    """The stage-A processes' task queue: records (pickle and shared file in one message)
    written to one SEQPACKET socket and read by three processes: each record arrives whole at
    exactly one of them, its arrays equal; the end of the socket is an EOFError."""
    tasks, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctx = multiprocessing.get_context("fork")
    procs, outs = [], []
    for _ in range(3):
        ours, out = socket.socketpair()
        p = ctx.Process(target=_reader, args=(theirs, out))
        p.start()
        out.close()
        procs.append(p)
        outs.append(ours)
    theirs.close()
    before = open_fds()
    n = 40
    for k in range(n):
        ipc.send_record(tasks, (k, sample_object(k % 4)))
    for _ in procs:
        ipc.send_record(tasks, None)
    assert open_fds() == before                      # every shared file's descriptor closed
    got = [x for o in outs for x in ipc.recv(o)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(k for k, _ in got) == list(range(n)) and all(ok for _, ok in got)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ipc.send_record(a, {"small": np.arange(3)})      # no large buffer: no file
    assert np.array_equal(ipc.recv_record(b)["small"], np.arange(3))
    a.close()
    with pytest.raises(EOFError):
        ipc.recv_record(b)
    for s in (b, tasks, *outs):
        s.close()


def test_an_unreadable_header_closes_its_shared_file():
    """A header that does not unpickle: the error, and the shared file's descriptor closed."""
    import pickle
    before = open_fds()
    fd = os.memfd_create("moagcn-test")
    with pytest.raises(pickle.UnpicklingError):
        ipc.unpack(b"not a pickle", fd)
    assert open_fds() == before
