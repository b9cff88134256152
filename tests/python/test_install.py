"""cmake --install puts a working package under the prefix (component python)."""

import os
import subprocess
import sys


def test_installed_package_imports_and_runs(tmp_path, mlp_onnx):
    build, libdir = os.environ["NPU_BUILD_DIR"], os.environ["NPU_PYTHON_INSTALL_DIR"]
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--component", "python", "--prefix",
                    str(prefix)], check=True, capture_output=True)
    site = prefix / libdir
    assert (site / "npu" / "runtime" / "session.py").exists()
    code = ("import npu, numpy as np\nfrom npu.runtime import session\n"
            "print(npu.__file__)\n"
            f"with session.create({mlp_onnx!r}) as s:\n"
            "    print(s.run(np.zeros((4, 64), np.float32))[0].numpy().shape)\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(site / "npu" / "__init__.py"), "(4, 10)"]
