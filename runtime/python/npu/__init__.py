"""npu: Python bindings of the NPU runtime (over its C API).

    from npu.runtime import session
    with session.create("model.onnx") as sess:
        outputs = sess.run(x)

See npu.runtime.session; the API mirrors FuriosaAI's legacy furiosa.runtime.session.
"""

__version__ = "0.1.0"

from . import runtime  # noqa: E402,F401
