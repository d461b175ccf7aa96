"""Objects between the prefetcher and its forked stage-A processes, without copies in Python.

A stage-A batch is a few megabytes of numpy arrays (the blocks' indices, the features, the
prepared operators) in a handful of Python objects. Pickled whole, the receiving process
rebuilds every array with its interpreter lock held (most of the cost is page faults on the
fresh buffers), and ``ProcessPoolExecutor`` adds two threads of its own; both run in the
trainer's process while it trains and slow its steps. Here the object is pickled with protocol
5 and its large buffers kept *out of band* (:func:`pack`): they are written, in one ``writev``,
to an anonymous shared-memory file (``memfd``), whose descriptor travels over a Unix socket
beside the small pickle (:func:`send`). The receiver maps the file (pre-faulted, with its lock
released) and unpickles the arrays as views of the mapping (:func:`unpack`, :func:`recv`); the
memory is returned when the last array of the object is gone. The measured costs of both ways
are in docs/hyscale.md ("Batches from the stage-A processes through shared memory").

Buffers under :data:`IN_BAND_BYTES` stay in the pickle (a file per small task costs more than
copying it). Where the platform has no ``memfd_create`` everything is pickled in band.

:func:`send_record` and :func:`recv_record` do the same over a ``SOCK_SEQPACKET`` socket, the
pickle and the descriptor in one record: many processes can read one such socket (the stage-A
processes' shared task queue), each record reaching exactly one of them, whole.
"""
from __future__ import annotations

import array
import mmap
import os
import pickle
import socket
from multiprocessing import reduction

#: buffers smaller than this are pickled in band
IN_BAND_BYTES = 1 << 14
_HEADER = 8
#: the largest pickle a record may carry (its large buffers travel in the shared file);
#: below Linux's default socket send buffer (212,992 bytes), the most one record can hold
RECORD_BYTES = 1 << 17


def pack(obj) -> tuple[bytes, int | None]:
    """Pickle ``obj``; its large buffers go to a new shared-memory file. Returns the pickle
    (with the buffers' sizes) and the file's descriptor (None if every buffer stayed in band);
    the caller owns the descriptor (:func:`unpack` closes it)."""
    bufs: list = []
    if hasattr(os, "memfd_create"):
        def keep(b):
            view = b.raw()
            if view.nbytes < IN_BAND_BYTES:
                return True                     # in band
            bufs.append(view)
            return False
        meta = pickle.dumps(obj, protocol=5, buffer_callback=keep)
    else:
        meta = pickle.dumps(obj, protocol=5)
    sizes = [b.nbytes for b in bufs]
    fd = None
    if bufs:
        fd = os.memfd_create("moagcn-batch", getattr(os, "MFD_CLOEXEC", 0))
        try:
            _write_all(fd, bufs)
        except BaseException:
            os.close(fd)
            raise
    return pickle.dumps((meta, sizes), protocol=5), fd


def _write_all(fd: int, views: list) -> None:
    total = sum(v.nbytes for v in views)
    done = 0
    pending = list(views)                 # PickleBuffer.raw(): flat byte views
    while pending:
        n = os.writev(fd, pending[:1024])
        done += n
        # drop what was written (writev may stop short on very large writes)
        while pending and n >= pending[0].nbytes:
            n -= pending[0].nbytes
            pending.pop(0)
        if n:
            pending[0] = pending[0][n:]
    if done != total:
        raise OSError(f"wrote {done} of {total} bytes to a shared-memory file")


def unpack(header: bytes, fd: int | None):
    """The object :func:`pack` made (closes ``fd``). Its large arrays are views of a shared
    mapping that lives as long as they do."""
    try:
        meta, sizes = pickle.loads(header)
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    if fd is None:
        return pickle.loads(meta)
    try:
        total = sum(sizes)
        if not total:
            return pickle.loads(meta, buffers=[b""] * len(sizes))
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        m = mmap.mmap(fd, total, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    view = memoryview(m)
    bufs, at = [], 0
    for s in sizes:
        bufs.append(view[at:at + s])
        at += s
    return pickle.loads(meta, buffers=bufs)


def send(sock: socket.socket, obj) -> None:
    """Send ``obj`` over the stream socket ``sock`` (see :func:`recv`)."""
    header, fd = pack(obj)
    try:
        sock.sendall(len(header).to_bytes(_HEADER, "little") + bytes([fd is not None])
                     + header)
        if fd is not None:
            reduction.sendfds(sock, [fd])
    finally:
        if fd is not None:
            os.close(fd)


def recv(sock: socket.socket):
    """The next object :func:`send` sent on ``sock``; EOFError when the other end closed."""
    head = _recv_exact(sock, _HEADER + 1)
    header = _recv_exact(sock, int.from_bytes(head[:_HEADER], "little"))
    fd = reduction.recvfds(sock, 1)[0] if head[_HEADER] else None
    return unpack(header, fd)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise EOFError("the other end of the socket closed")
        got += k
    return bytes(buf)


def send_record(sock: socket.socket, obj) -> None:
    """Send ``obj`` as one record on the ``SOCK_SEQPACKET`` socket ``sock``: the pickle and,
    when it has large buffers, the shared file's descriptor, in one message (see
    :func:`recv_record`). Blocks while the socket's buffer is full."""
    header, fd = pack(obj)
    try:
        if len(header) + 1 > RECORD_BYTES:
            raise ValueError(f"a record's pickle of {len(header)} bytes exceeds {RECORD_BYTES}")
        fds = [] if fd is None else \
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        sock.sendmsg([bytes([fd is not None]) + header], fds)
    finally:
        if fd is not None:
            os.close(fd)


def recv_record(sock: socket.socket):
    """The next record :func:`send_record` sent on ``sock``; EOFError when every sender's end
    is closed."""
    msg, anc, flags, _ = sock.recvmsg(RECORD_BYTES, socket.CMSG_SPACE(array.array("i").itemsize))
    fds = [fd for level, kind, data in anc
           if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
           for fd in array.array("i", data[:len(data) - len(data) % 4])]
    if not msg:
        for fd in fds:
            os.close(fd)
        raise EOFError("the other end of the socket closed")
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) != msg[0]:
        for fd in fds:
            os.close(fd)
        raise OSError("a record arrived cut short (its pickle or its descriptor)")
    return unpack(msg[1:], fds[0] if fds else None)
