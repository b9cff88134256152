"""Sessions (furiosa.runtime.session's legacy API over the NPU runtime's C API).

create(model, device=None, **options) -> Session
    model: a path or the bytes of a model image (npu-compile) or of an ONNX model, which is
    compiled on the fly for the device's MAC array. device: "sim" (default: $NPU_DEVICE, else
    "sim"), "rtl", "accel:0", a comma-separated list.
    options: calibration_method ("minmax", "percentile[=P]", "entropy"), calibration (a list
    of samples, each a list of arrays or one array for a one-input model), calibration_dir,
    input_shapes ({name: shape}), bias_correction (bool), weight_rounding ("nearest" or
    "gptq"; npu-compile's options of those names), compile_progress (a callable taking each line, or True to
    print them to stderr); compiler_config (a dict of those, the legacy spelling); profile (a
    path: this session's Chrome trace, written when it closes).
create_async(model, device=None, input_queue_size=64, output_queue_size=64, **options)
    -> (AsyncSession, CompletionQueue): at most input_queue_size + output_queue_size requests
    submitted and not yet received; submit blocks only while that many are.

Close rules: Session.close() lets runs in flight on other threads finish; afterwards every
method raises SessionClosed. AsyncSession.close() closes the submit side and drains: requests
already submitted still complete, and once all are received recv raises SessionTerminated.
CompletionQueue.close() cancels what is still pending, releases every context it was given,
and from then on recv raises SessionClosed. Every submitted request completes exactly once:
recv returns (context, outputs), or raises the request's error carrying .context.
The GIL is released while run, submit and recv wait; Ctrl-C interrupts them.
"""

import itertools
import os
import sys

import numpy as np

from . import _native
from .errors import (InvalidInput, NotFound, QueueWaitTimeout, SessionClosed, SessionTerminated,
                     TensorNameNotFound, from_status)
from .profiler import _Runtime
from .tensor import Tensor, TensorArray, TensorDesc

__all__ = ["create", "create_async", "Session", "AsyncSession", "CompletionQueue"]

_COMPILE_OPTIONS = ("calibration_method", "calibration", "calibration_dir", "input_shapes",
                    "compile_progress", "bias_correction", "weight_rounding")


def _read_model(model):
    """-> (bytes, origin, path or None)."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                return f.read(), path, path
        except FileNotFoundError:
            raise NotFound(f"{path}: no such file; give an .onnx model or an image written by "
                           "npu-compile") from None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>", None
    raise InvalidInput(f"model must be a path or bytes, got {type(model).__name__}")


def _load(runtime, model, options):
    data, origin, path = _read_model(model)
    if _native.is_image(data):
        return _native.Model.from_bytes(data, origin)
    calibration = options.get("calibration") or []
    if isinstance(calibration, np.ndarray):
        calibration = [[calibration]]
    calibration = [[s] if isinstance(s, np.ndarray) else list(s) for s in calibration]
    progress = options.get("compile_progress")
    if progress is True:
        def progress(line):
            print(f"npu: {line}", file=sys.stderr)
    elif progress is False:
        progress = None
    shapes = {k: [int(d) for d in v] for k, v in (options.get("input_shapes") or {}).items()}
    image = _native.compile_onnx(
        data, path=path, array_dim=runtime.native.device_info(0)["array_dim"],
        calibration_method=options.get("calibration_method"), calibration=calibration,
        calibration_dir=options.get("calibration_dir"), input_shapes=shapes, progress=progress,
        bias_correction=bool(options.get("bias_correction", False)),
        weight_rounding=options.get("weight_rounding"))
    return _native.Model.from_bytes(image, origin)


def _split_options(options, allowed):
    options = dict(options)
    config = options.pop("compiler_config", None) or {}
    for k, v in config.items():
        options.setdefault(k, v)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise InvalidInput(f"unknown session option(s) {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(allowed))}")
    return options


def _open(model, device, options, label):
    rt = _Runtime(device, label)
    native_model = _load(rt, model, options)
    if options.get("profile") is not None:
        rt.start_own_profile(options["profile"])
    return rt, native_model


class _Closable:
    """with-statement support; close() also when garbage-collected while open."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_closed", True) is False:
            self.close()


class _ModelInfo(_Closable):
    """Introspection shared by Session and AsyncSession."""

    def _init_model(self, native_model):
        self._model = native_model
        self._inputs = [TensorDesc(d, i) for i, d in enumerate(native_model.inputs())]
        self._outputs = [TensorDesc(d, i) for i, d in enumerate(native_model.outputs())]
        self._input_index = {d.name: i for i, d in enumerate(self._inputs)}
        self._output_index = {d.name: i for i, d in enumerate(self._outputs)}

    def _check_open(self):
        if self._closed:
            raise SessionClosed(f"the {type(self).__name__} is closed", "UNAVAILABLE")

    def inputs(self):
        self._check_open()
        return list(self._inputs)

    def outputs(self):
        self._check_open()
        return list(self._outputs)

    def input(self, idx):
        self._check_open()
        return self._inputs[idx]

    def output(self, idx):
        self._check_open()
        return self._outputs[idx]

    @property
    def input_num(self):
        self._check_open()
        return len(self._inputs)

    @property
    def output_num(self):
        self._check_open()
        return len(self._outputs)

    def summary(self, verbose=False):
        """The inputs and outputs, as furiosa's summary(); verbose adds the runtime's model
        summary (placement, MACs, predicted cycles)."""
        self._check_open()
        lines = ["Inputs:"]
        lines.append("{" + ", ".join(f"{i}: {d!r}" for i, d in enumerate(self._inputs)) + "}")
        lines.append("Outputs:")
        lines.append("{" + ", ".join(f"{i}: {d!r}" for i, d in enumerate(self._outputs)) + "}")
        text = "\n".join(lines)
        if verbose:
            text += "\n" + self._model.summary()
        return text

    def print_summary(self, verbose=False):
        print(self.summary(verbose))

    def model_summary_json(self):
        """The runtime's model summary as a JSON string."""
        self._check_open()
        return self._model.summary(True)

    def allocate_inputs(self):
        """Zero tensors for every input, to fill with Tensor.copy_from or numpy()[...] = ."""
        self._check_open()
        return TensorArray(Tensor(d, np.zeros(d.shape, d.numpy_dtype)) for d in self._inputs)

    def _prepare(self, values):
        """Inputs as a list of ndarrays in input order, checked for count and dtype (the
        runtime checks shapes)."""
        if isinstance(values, TensorArray):
            values = [t.numpy() for t in values]
        elif isinstance(values, (np.ndarray, Tensor)):
            values = [values]
        elif isinstance(values, (list, tuple)):
            values = list(values)
        else:
            raise InvalidInput(f"inputs must be an ndarray, a list of ndarrays or a TensorArray, "
                               f"got {type(values).__name__}")
        if len(values) != len(self._inputs):
            names = ", ".join(f"'{d.name}'" for d in self._inputs)
            raise InvalidInput(f"the model has {len(self._inputs)} input(s) ({names}), got "
                               f"{len(values)}")
        out = []
        for v, d in zip(values, self._inputs):
            if isinstance(v, Tensor):
                v = v.numpy()
            if not isinstance(v, np.ndarray):
                raise InvalidInput(f"input '{d.name}' must be a numpy array, got "
                                   f"{type(v).__name__}")
            if v.dtype != d.numpy_dtype and v.dtype != np.float32:
                raise InvalidInput(f"input '{d.name}' expects {d.numpy_dtype}, got {v.dtype}; "
                                   f"convert it with .astype(np.{d.numpy_dtype})")
            out.append(v)
        return out

    def _wrap(self, arrays, descs=None):
        descs = descs or self._outputs
        return TensorArray(Tensor(d, a) for d, a in zip(descs, arrays))


class Session(_ModelInfo):
    """A blocking session: run() from any number of threads."""

    def __init__(self, model, device=None, **options):
        options = _split_options(options, _COMPILE_OPTIONS + ("profile",))
        self._closed = True
        self._runtime, native_model = _open(model, device, options, "session")
        self._init_model(native_model)
        self._native = _native.Session(self._runtime.native, native_model)
        self._closed = False
        self.last_stats = None

    def run(self, inputs):
        """Runs one request; -> TensorArray of the outputs (their arrays own their memory).
        inputs: an ndarray (one-input models), a list of ndarrays or a TensorArray.
        The request's measurements are in last_stats afterwards."""
        self._check_open()
        arrays, stats = self._native.run(self._prepare(inputs))
        self.last_stats = stats
        return self._wrap(arrays)

    def run_with(self, outputs, inputs):
        """Runs with inputs by name ({name: array}); -> TensorArray of the named outputs, in
        the order given."""
        self._check_open()
        for name in inputs:
            if name not in self._input_index:
                raise TensorNameNotFound(f"the model has no input '{name}'; inputs: "
                                         f"{', '.join(self._input_index)}")
        missing = [d.name for d in self._inputs if d.name not in inputs]
        if missing:
            raise InvalidInput(f"missing input(s) {', '.join(missing)}")
        picks = []
        for name in outputs:
            if name not in self._output_index:
                raise TensorNameNotFound(f"the model has no output '{name}'; outputs: "
                                         f"{', '.join(self._output_index)}")
            picks.append(self._output_index[name])
        result = self.run([inputs[d.name] for d in self._inputs])
        return TensorArray(result[i] for i in picks)

    def close(self):
        """Closes the session (idempotent); runs in flight on other threads finish."""
        if self._closed:
            return
        self._closed = True
        self._native.close()
        self._runtime.end_own_profile()
        self._runtime = None  # the device closes with its last user (or profile() block)


class _Contexts:
    """Token -> context object, for the requests in flight (touched with the GIL only)."""

    def __init__(self):
        self.by_token = {}
        self.next = itertools.count(1)


class AsyncSession(_ModelInfo):
    """The submit side of an async session (see create_async)."""

    def __init__(self, native, runtime, native_model, contexts):
        self._closed = True
        self._native = native
        self._runtime = runtime
        self._init_model(native_model)
        self._contexts = contexts
        self._closed = False

    def submit(self, values, context=None, timeout=None):
        """Queues one request; blocks only while the queue is full (up to `timeout` seconds
        when given: DeviceBusy after it). -> the request id (for cancel)."""
        self._check_open()
        prepared = self._prepare(values)
        token = next(self._contexts.next)
        self._contexts.by_token[token] = context
        try:
            timeout_us = -1 if timeout is None else int(timeout * 1e6)
            return self._native.submit(prepared, token, timeout_us)
        except BaseException:
            # Not accepted: it never completes, so nobody else releases the context.
            self._contexts.by_token.pop(token, None)
            raise

    def cancel(self, request_id):
        """Cancels that request only: it completes with RequestCancelled (its context comes
        back on the error), unless the device had already started it, then normally.
        False when it is no longer pending."""
        self._check_open()
        return self._native.cancel(request_id)

    def close(self):
        """Closes the submit side (idempotent); submitted requests still complete."""
        if self._closed:
            return
        self._closed = True
        self._native.close()
        self._runtime = None  # requests in flight keep what they need


class CompletionQueue(_Closable):
    """The receive side of an async session: recv() or iterate."""

    def __init__(self, native, runtime, output_descs, contexts):
        self._native = native
        self._runtime = runtime
        self._outputs = output_descs
        self._contexts = contexts
        self._closed = False

    def recv(self, timeout_ms=None, *, timeout=None):
        """Waits for the next completion: -> (context, TensorArray of outputs).
        timeout_ms (or timeout, the legacy keyword, also in ms): None waits forever, 0 polls.
        Raises QueueWaitTimeout when none came in time, SessionTerminated when the submit side
        is closed and every request has been received, SessionClosed after close(), and a
        request's own error (with .context and .request_id) when it failed or was cancelled."""
        if timeout_ms is None:
            timeout_ms = timeout
        if self._closed:
            raise SessionClosed("the completion queue is closed", "UNAVAILABLE")
        timeout_us = -1 if timeout_ms is None else max(0, int(timeout_ms * 1000))
        try:
            token, request_id, status, name, message, arrays, _stats = self._native.recv(
                timeout_us, "SessionTerminated")
        except SessionTerminated:
            if self._closed:
                raise SessionClosed("the completion queue is closed", "UNAVAILABLE") from None
            raise
        context = self._contexts.by_token.pop(token, None)
        if status != 0:
            exc = from_status(status, name, message)
            exc.context = context
            exc.request_id = request_id
            try:
                raise exc
            finally:
                # The traceback keeps this frame: without these the frame and the exception
                # would form a cycle holding the context until the next garbage collection.
                exc = context = None
        return context, TensorArray(Tensor(d, a) for d, a in zip(self._outputs, arrays))

    def try_recv(self):
        """recv(0) returning None instead of raising QueueWaitTimeout."""
        try:
            return self.recv(0)
        except QueueWaitTimeout:
            return None

    @property
    def outstanding(self):
        """Requests submitted and not yet received."""
        return self._native.outstanding()

    def close(self):
        """Closes the queue (idempotent): pending requests are cancelled, and every context
        still held is released here (waiting for requests the device is running to end)."""
        if self._closed:
            return
        self._closed = True
        self._native.close()
        while True:
            try:
                token = self._native.recv(-1, "SessionClosed")[0]
            except SessionClosed:
                break
            self._contexts.by_token.pop(token, None)
        self._contexts.by_token.clear()
        self._native.destroy()
        self._runtime.end_own_profile()
        self._runtime = None

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self.recv()
        except (SessionTerminated, SessionClosed):
            raise StopIteration from None


class _AsyncPair(tuple):
    """(AsyncSession, CompletionQueue), usable in a with statement that closes both."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self[0].close()
        self[1].close()
        return False


def create(model, device=None, **options):
    """A blocking Session (see the module comment)."""
    return Session(model, device, **options)


def create_async(model, device=None, input_queue_size=64, output_queue_size=64, **options):
    """(AsyncSession, CompletionQueue) (see the module comment)."""
    options = _split_options(options, _COMPILE_OPTIONS + ("profile",))
    if input_queue_size < 1 or output_queue_size < 0:
        raise InvalidInput("input_queue_size must be >= 1 and output_queue_size >= 0")
    runtime, native_model = _open(model, device, options, "async session")
    native_session, native_queue = _native.AsyncSession.create(
        runtime.native, native_model, int(input_queue_size + output_queue_size))
    contexts = _Contexts()
    sess = AsyncSession(native_session, runtime, native_model, contexts)
    queue = CompletionQueue(native_queue, runtime, sess._outputs, contexts)
    return _AsyncPair((sess, queue))
