"""npu.runtime: sessions over the NPU runtime's C API (FuriosaAI legacy API shape).

    from npu.runtime import session
    sess = session.create("tests/data/mlp.onnx")      # an image, or ONNX compiled on the fly
    outputs = sess.run(x)                              # TensorArray; outputs[0].numpy()

    async_sess, queue = session.create_async(model, input_queue_size=16)
    async_sess.submit([x], context=42)
    context, outputs = queue.recv(timeout_ms=1000)

Modules: session (create, create_async, Session, AsyncSession, CompletionQueue), tensor
(TensorDesc, Tensor, TensorArray, DataType), errors, and profile (Chrome traces).
"""

from . import errors, session, tensor  # noqa: F401
from .profiler import profile  # noqa: F401

__version__ = "0.1.0"
__all__ = ["errors", "session", "tensor", "profile"]
