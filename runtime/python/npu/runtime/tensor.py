"""Tensor descriptors and tensors (furiosa.runtime.tensor's TensorDesc, Tensor, TensorArray).

A TensorDesc describes a model input or output: name, shape, dtype, format (layout, e.g.
"NCHW"), size in bytes, length in elements, element strides and quantisation. Tensors are
numpy arrays underneath; an output Tensor's array owns the runtime's output memory.
"""

import enum
from collections import namedtuple
from functools import reduce

import numpy as np

__all__ = ["DataType", "QuantizationParameter", "TensorDesc", "Tensor", "TensorArray"]


class DataType(enum.IntEnum):
    """Element types; values equal the C API's npu_dtype_t."""
    FLOAT32 = 0
    INT8 = 1
    UINT8 = 2
    INT32 = 3
    INT64 = 4

    @property
    def numpy_dtype(self):
        return np.dtype(_NUMPY[self])

    def __str__(self):
        return self.name

    @classmethod
    def from_numpy(cls, dtype):
        dtype = np.dtype(dtype)
        for k, v in _NUMPY.items():
            if np.dtype(v) == dtype:
                return k
        raise ValueError(f"no DataType for numpy dtype {dtype}")


_NUMPY = {
    DataType.FLOAT32: np.float32,
    DataType.INT8: np.int8,
    DataType.UINT8: np.uint8,
    DataType.INT32: np.int32,
    DataType.INT64: np.int64,
}

# real = scale * (q - zero_point); per tensor when axis is -1 (scale and zero_point are then
# numbers), else per index of dimension `axis` (tuples).
QuantizationParameter = namedtuple("QuantizationParameter", ["scale", "zero_point", "axis"])


def _quant(q):
    if q is None:
        return None
    axis, scale, zp = q
    if axis < 0 and len(scale) == 1:
        return QuantizationParameter(float(scale[0]), int(zp[0]), -1)
    return QuantizationParameter(tuple(float(s) for s in scale), tuple(int(z) for z in zp), axis)


class TensorDesc:
    """Describes one model input or output (immutable)."""

    __slots__ = ("_d", "_index")

    def __init__(self, desc, index=0):
        self._d = desc
        self._index = index

    @property
    def index(self):
        return self._index

    @property
    def name(self):
        return self._d["name"]

    @property
    def shape(self):
        return tuple(self._d["shape"])

    @property
    def ndim(self):
        return len(self._d["shape"])

    def dim(self, idx):
        return self._d["shape"][idx]

    @property
    def dtype(self):
        return DataType(self._d["dtype"])

    @property
    def numpy_dtype(self):
        return self.dtype.numpy_dtype

    @property
    def format(self):
        """The layout, e.g. "NCHW" or "NC" ("" when the model does not say)."""
        return self._d["layout"]

    def axis(self, idx):
        """The letter of dimension `idx` in the layout ("?" when there is none)."""
        f = self.format
        return f[idx] if len(f) == self.ndim else "?"

    @property
    def length(self):
        """Number of elements."""
        return int(reduce(lambda a, b: a * b, self.shape, 1))

    @property
    def size(self):
        """Size in bytes."""
        return self.length * self.numpy_dtype.itemsize

    def stride(self, idx):
        """Element stride of dimension `idx` (dense, row-major)."""
        return int(reduce(lambda a, b: a * b, self.shape[idx + 1:], 1))

    @property
    def quantization_parameter(self):
        """QuantizationParameter(scale, zero_point, axis) the model records for this tensor,
        or None. For an integer-typed tensor it gives the meaning of its codes
        (real = scale * (q - zero_point)); for a float tensor it is the compiler's calibrated
        range, and the runtime quantises and dequantises by itself."""
        return _quant(self._d["quant"])

    @property
    def device_quantization_parameter(self):
        """The quantisation of the device's int8 view the runtime converts to and from (None
        for a value only the host touches)."""
        return _quant(self._d["device_quant"])

    def __repr__(self):
        return (f'TensorDesc(name="{self.name}", shape={self.shape}, dtype={self.dtype.name}, '
                f"format={self.format or '?'}, size={self.size}, len={self.length})")

    def __eq__(self, other):
        return isinstance(other, TensorDesc) and self._d == other._d

    def __hash__(self):
        return hash((self.name, self.shape, self._d["dtype"]))


class Tensor:
    """A tensor with its descriptor; numpy() returns the array itself (no copy)."""

    __slots__ = ("_desc", "_array")

    def __init__(self, desc, array):
        self._desc = desc
        self._array = array

    @property
    def desc(self):
        return self._desc

    @property
    def shape(self):
        return self._array.shape

    @property
    def dtype(self):
        return DataType.from_numpy(self._array.dtype)

    def numpy(self):
        return self._array

    def copy_from(self, data):
        """Fills the tensor from `data` (same shape; converted to the tensor's dtype)."""
        data = np.asarray(data)
        if data.shape != self._array.shape:
            from .errors import InvalidInput
            raise InvalidInput(f"tensor '{self._desc.name}' has shape {self._array.shape}, "
                               f"got {data.shape}")
        np.copyto(self._array, data, casting="same_kind")

    def __array__(self, dtype=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __repr__(self):
        return f"Tensor({self._desc!r}, {self._array!r})"


class TensorArray:
    """A sequence of Tensors (a request's inputs or outputs)."""

    __slots__ = ("_tensors",)

    def __init__(self, tensors):
        self._tensors = list(tensors)

    def __len__(self):
        return len(self._tensors)

    def __getitem__(self, i):
        return self._tensors[i]

    def __iter__(self):
        return iter(self._tensors)

    def numpy(self):
        """The arrays (no copies)."""
        return [t.numpy() for t in self._tensors]

    def view(self):
        return self.numpy()

    def __repr__(self):
        return "TensorArray([" + ", ".join(repr(t) for t in self._tensors) + "])"
