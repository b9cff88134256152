"""A program written against FuriosaAI's legacy Python API (furiosa-sdk's
furiosa.runtime.session, errors and tensor), unchanged but for its import line.
test_furiosa_compat.py runs it with that line changed to npu.runtime.

usage: furiosa_legacy_app.py MODEL.onnx
"""
import sys

import numpy as np
from furiosa.runtime import errors, session

model = sys.argv[1]

with session.create(model) as sess:
    sess.print_summary()
    print("inputs", sess.input_num, "outputs", sess.output_num)
    desc = sess.input(0)
    print(desc.name, desc.shape, desc.ndim, desc.dtype, desc.numpy_dtype, desc.format,
          desc.size, desc.length, [desc.stride(i) for i in range(desc.ndim)])
    x = np.random.random(desc.shape).astype(desc.numpy_dtype)
    outputs = sess.run(x)
    y = outputs[0].numpy()
    y2 = sess.run([x])[0].numpy()
    y3 = sess.run_with([sess.output(0).name], {desc.name: x})[0].numpy()
    assert (y == y2).all() and (y == y3).all()
    for o in sess.outputs():
        print("output", o.name, o.shape, o.dtype)
    try:
        sess.run(x.astype(np.float64))
        raise SystemExit("float64 input accepted")
    except errors.InvalidInput as e:
        print("InvalidInput:", e)
    try:
        sess.run_with(["no_such_output"], {desc.name: x})
        raise SystemExit("unknown output accepted")
    except errors.TensorNameNotFound:
        pass
    except errors.FuriosaError:
        pass

async_sess, queue = session.create_async(model, input_queue_size=8, output_queue_size=8)
for i in range(10):
    async_sess.submit([x], context=i)
contexts = set()
for _ in range(10):
    context, outputs = queue.recv()
    contexts.add(context)
    assert (outputs[0].numpy() == y).all()
assert contexts == set(range(10)), contexts
try:
    queue.recv(100)
    raise SystemExit("recv(100) returned")
except errors.QueueWaitTimeout:
    pass
async_sess.close()
try:
    queue.recv()
    raise SystemExit("recv after close returned")
except errors.SessionTerminated:
    pass
queue.close()
try:
    queue.recv()
    raise SystemExit("recv after queue.close returned")
except errors.SessionClosed:
    pass
print("OK")
