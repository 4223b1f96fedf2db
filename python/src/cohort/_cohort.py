"""The C++ side of the package: libcohort.so (the kvstore behind a C interface), through
ctypes, so that one build serves every CPython 3. Arrays go in and out without copies: anything
with the buffer protocol (numpy arrays; cohort.kvstore hands torch tensors over as numpy views
of their memory) that is C-contiguous float32 is read or written in place, its buffer held
while the kvstore uses it. ctypes lets the GIL go during every call; every error raises Error
with the C++ message.
"""

import ctypes
import os

_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcohort.so"))


class Error(RuntimeError):
    """What every failed call of Cohort raises."""


_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_strings_p = ctypes.c_void_p


def _declare(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


_B, _P, _I, _I64, _D, _S = (ctypes.c_bool, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_double, ctypes.c_char_p)
_error = _declare("cohort_error", _S)
_create = _declare("cohort_create", _B, _S, ctypes.POINTER(_P))
_free = _declare("cohort_free", None, _P)
_type = _declare("cohort_type", _S, _P)
_compression = _declare("cohort_gradient_compression", _S, _P)
_rank = _declare("cohort_rank", _I, _P)
_num_workers = _declare("cohort_num_workers", _I, _P)
_set_optimizer = _declare("cohort_set_optimizer", _B, _P, _S, _D, _D, _D, _S, _I64, _I64, _D,
                          _D, _D, _D)
_set_learning_rate = _declare("cohort_set_learning_rate", _B, _P, _D)
_init = _declare("cohort_init", _B, _P, _I64, _P, _c_int64_p, _I, _B)
_push = _declare("cohort_push", _B, _P, _I64, _P, _c_int64_p, _I)
_pull = _declare("cohort_pull", _B, _P, _I64, _P, _c_int64_p, _I)
_pushpull = _declare("cohort_pushpull", _B, _P, _I64, _P, _c_int64_p, _I, _P, _c_int64_p, _I)
_wait = _declare("cohort_wait", _B, _P, _I64)
_recover = _declare("cohort_recover", _B, _P)
_workers_changed = _declare("cohort_workers_changed", _B, _P)
_failed = _declare("cohort_failed", _B, _P)
_worker_hosts = _declare("cohort_worker_hosts", _B, _P, ctypes.POINTER(_I),
                         ctypes.POINTER(_strings_p))
_barrier = _declare("cohort_barrier", _B, _P)
_exchange = _declare("cohort_exchange", _B, _P, _S, ctypes.c_size_t, ctypes.POINTER(_strings_p))
_strings_size = _declare("cohort_strings_size", ctypes.c_size_t, _strings_p)
_strings_at = _declare("cohort_strings_at", ctypes.POINTER(ctypes.c_char), _strings_p,
                       ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))
_strings_free = _declare("cohort_strings_free", None, _strings_p)
_record_step = _declare("cohort_record_step", None, _P, _I64, _I64, _I64, _D, _D, _D, _D)
_metrics_port = _declare("cohort_metrics_port", _I, _P)
_start_step = _declare("cohort_start_step", _B, _P, _c_int64_p)
_set_exit_reason = _declare("cohort_set_exit_reason", None, _S)


def _check(ok):
    if not ok:
        raise Error(_error().decode(errors="replace"))


def _take_strings(strings):
    """The byte strings of a list the C side made, which is then freed."""
    try:
        size = ctypes.c_size_t()
        return [ctypes.string_at(_strings_at(strings, i, ctypes.byref(size)), size.value)
                for i in range(_strings_size(strings))]
    finally:
        _strings_free(strings)


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (part of the stable ABI since 3.11)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.restype = ctypes.c_int
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.restype = None
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_PyBUF_WRITABLE, _PyBUF_FORMAT, _PyBUF_STRIDES = 0x1, 0x4, 0x18
_FLOAT32 = (b"f", b"<f", b"=f", b"@f")


class Memory:
    """float32 memory at address data with dimensions shape, kept (in place) by owner for as
    long as this is held: a contiguous torch tensor's, taken without the buffer protocol's
    cost."""

    __slots__ = ("data", "dims", "ndim", "_owner")

    def __init__(self, data, shape, owner):
        self.data, self.ndim, self._owner = data, len(shape), owner
        self.dims = (ctypes.c_int64 * self.ndim)(*shape)

    def release(self):
        """Nothing to give back: the owner goes with this object."""


def _borrow(array, writable, key, what):
    """array's memory, held until release(): a Memory as it is, a numpy array that fits by its
    address (holding it keeps its memory: numpy resizes no array another holds), anything else
    through the buffer protocol (which also says what does not fit)."""
    kind = type(array)
    if kind is Memory:
        return array
    if kind.__name__ == "ndarray" and kind.__module__ == "numpy":
        flags = array.flags
        if flags.c_contiguous and (flags.writeable or not writable) and \
                array.dtype.char == "f" and array.size > 0:
            return Memory(array.__array_interface__["data"][0], array.shape, array)
    return _Borrowed(array, writable, key, what)


class _Borrowed:
    """An array's float32 memory and dimensions, its buffer held (the array and its memory
    stay in place) until release()."""

    def __init__(self, array, writable, key, what):
        self._view = None
        view = _PyBuffer()
        flags = _PyBUF_STRIDES | _PyBUF_FORMAT | (_PyBUF_WRITABLE if writable else 0)
        try:
            _get_buffer(array, ctypes.byref(view), flags)
        except TypeError:
            raise Error(f"key {key}: {what} is a {type(array).__name__}, not an array: give a "
                        "numpy array or a CPU torch tensor") from None
        except (BufferError, ValueError) as e:
            raise Error(f"key {key}: {what} is not "
                        f"{'a writable array' if writable else 'an array'}: {e}") from None
        self._view = view
        shape = [view.shape[i] for i in range(view.ndim)]
        if view.format not in _FLOAT32 or view.itemsize != 4:
            self.release()
            dtype = (str(array.dtype) if hasattr(array, "dtype")
                     else f"format '{view.format.decode()}'")
            raise Error(f"key {key}: {what} holds {dtype}; the kvstore holds float32 "
                        "(np.float32, torch.float32)")
        strides = [view.strides[i] for i in range(view.ndim)]
        expected = 4
        for size, stride in reversed(list(zip(shape, strides))):
            if size > 1 and stride != expected:
                self.release()
                raise Error(f"key {key}: {what} of shape ({', '.join(map(str, shape))}) is not "
                            f"C-contiguous (strides {', '.join(map(str, strides))}): pass "
                            "np.ascontiguousarray(x) or x.contiguous()")
            expected *= size
        self.data = view.buf
        self.dims = (ctypes.c_int64 * len(shape))(*shape)
        self.ndim = len(shape)

    def release(self):
        if self._view is not None:
            _release_buffer(ctypes.byref(self._view))
            self._view = None

    def __del__(self):
        self.release()


class KVStore:
    """A kvstore: calls from several Python threads take turns (the C++ store takes one at a
    time); each waits without the GIL."""

    def __init__(self, handle):
        self._handle = handle
        self._in_flight = {}  # key: the borrowed (grad, out) of its pushpull, until wait()

    def __del__(self):
        # The store ends (and stops writing) before the arrays of its pushpulls are let go.
        if getattr(self, "_handle", None):
            _free(self._handle)
            self._handle = None
        for key in list(getattr(self, "_in_flight", {})):
            self._let_go(key)

    def _let_go(self, key):
        """Releases the arrays of key's pushpull, if one is in flight."""
        for a in self._in_flight.pop(key, ()):
            a.release()

    @property
    def type(self):
        return _type(self._handle).decode()

    @property
    def gradient_compression(self):
        return _compression(self._handle).decode()

    @property
    def rank(self):
        return _rank(self._handle)

    @property
    def num_workers(self):
        return _num_workers(self._handle)

    def set_optimizer(self, optimizer, lr, momentum, wd, lr_schedule, epochs, steps_per_epoch,
                      warmup_epochs, beta1, beta2, eps):
        _check(_set_optimizer(self._handle, optimizer.encode(), lr, momentum, wd,
                              lr_schedule.encode(), epochs, steps_per_epoch, warmup_epochs,
                              beta1, beta2, eps))

    def set_learning_rate(self, lr):
        _check(_set_learning_rate(self._handle, lr))

    def _call_with(self, f, key, array, writable, what, *rest):
        a = _borrow(array, writable, key, what)
        try:
            _check(f(self._handle, key, a.data, a.dims, a.ndim, *rest))
        finally:
            a.release()

    def init(self, key, value, auxiliary):
        self._call_with(_init, key, value, False, "the initial value", auxiliary)

    def push(self, key, grad):
        self._call_with(_push, key, grad, False, "the gradient")

    def pull(self, key, out):
        self._call_with(_pull, key, out, True, "the output")

    def pushpull(self, key, grad, out):
        """Starts key's push of grad and pull into out; both stay borrowed until wait(key)."""
        if key in self._in_flight:
            raise Error(f"key {key}: a pushpull is in flight; wait() for it first")
        g = _borrow(grad, False, key, "the gradient")
        try:
            o = _borrow(out, True, key, "the output")
        except Error:
            g.release()
            raise
        if not _pushpull(self._handle, key, g.data, g.dims, g.ndim, o.data, o.dims, o.ndim):
            g.release()
            o.release()
            _check(False)
        self._in_flight[key] = (g, o)

    def wait(self, key):
        try:
            _check(_wait(self._handle, key))
        finally:
            self._let_go(key)

    def recover(self):
        _check(_recover(self._handle))
        for key in list(self._in_flight):  # the streams were stopped: nothing writes into them
            self._let_go(key)

    @property
    def workers_changed(self):
        return _workers_changed(self._handle)

    @property
    def failed(self):
        return _failed(self._handle)

    def worker_hosts(self):
        rank, hosts = ctypes.c_int(), _strings_p()
        _check(_worker_hosts(self._handle, ctypes.byref(rank), ctypes.byref(hosts)))
        return rank.value, [h.decode() for h in _take_strings(hosts)]

    def barrier(self):
        _check(_barrier(self._handle))

    def exchange(self, payload):
        payload = bytes(payload)
        everyone = _strings_p()
        _check(_exchange(self._handle, payload, len(payload), ctypes.byref(everyone)))
        return _take_strings(everyone)

    def record_step(self, step, epoch, images, step_seconds, comm_seconds, loss, lr):
        _record_step(self._handle, step, epoch, images, step_seconds, comm_seconds, loss, lr)

    @property
    def metrics_port(self):
        port = _metrics_port(self._handle)
        return None if port < 0 else port

    def start_step(self):
        step = ctypes.c_int64()
        _check(_start_step(self._handle, ctypes.byref(step)))
        return step.value


def create(type):
    """A kvstore: "local" (this process) or "dist_sync"/"dist_async" (joins the job the
    launcher describes in COHORT_* variables)."""
    handle = _P()
    _check(_create(type.encode(), ctypes.byref(handle)))
    return KVStore(handle)


def set_exit_reason(reason):
    """The exception ending the program (its last line), said with its exit status."""
    _set_exit_reason(reason.encode(errors="replace"))
