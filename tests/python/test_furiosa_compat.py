"""FuriosaAI compatibility: furiosa_legacy_app.py, written against Furiosa's legacy
furiosa.runtime API, runs after changing only its import line."""

import difflib
import os
import pathlib
import subprocess
import sys

APP = pathlib.Path(__file__).with_name("furiosa_legacy_app.py")


def test_legacy_program_runs_with_one_changed_line(tmp_path, mlp_onnx):
    original = APP.read_text()
    ported = original.replace("from furiosa.runtime import", "from npu.runtime import")
    changed = [line for line in difflib.unified_diff(original.splitlines(), ported.splitlines(),
                                                     lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert len(changed) == 2, changed  # one line out, one line in
    assert not [line for line in ported.splitlines()
                if line.startswith(("import", "from")) and "furiosa" in line]
    script = tmp_path / "app.py"
    script.write_text(ported)
    r = subprocess.run([sys.executable, str(script), mlp_onnx], capture_output=True, text=True,
                       env=os.environ, timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "OK"
    assert "InvalidInput:" in r.stdout and "TensorDesc(name=\"x\"" in r.stdout
