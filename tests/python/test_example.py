"""runtime/python/examples/mobilenet.py (quoted by the README) runs and does what it says."""

import json
import os
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "runtime/python/examples/mobilenet.py"


def test_mobilenet_example(tmp_path):
    trace = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--requests", "24", "--trace", str(trace)],
                       capture_output=True, text=True, env=os.environ, timeout=600,
                       cwd=tmp_path)
    print(r.stdout)
    assert r.returncode == 0, r.stderr
    assert 'TensorDesc(name="input", shape=(1, 3, 128, 128)' in r.stdout
    assert "top-5 classes:" in r.stdout
    assert "24 async requests:" in r.stdout
    spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert len({e["args"]["request"] for e in spans}) == 24
