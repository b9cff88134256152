#!/usr/bin/env python3
"""The SDK consumer test (ctest consumer.sdk).

1. Installs the build into a temporary prefix (and once more with DESTDIR) and checks that
   install_manifest.txt names only files under it.
2. Compiles tests/data/mlp.onnx with the installed npu-compile.
3. Builds tests/consumer (a C and a C++ program) out of tree against the prefix only, with
   find_package(npu) and with pkg-config, and runs each on sim: the outputs must equal
   npu-run's on the same input, bit for bit, and nothing may reach stderr (quiet by default).
4. Checks with ldd and nm that neither the consumers nor libnpu.so link ONNX, protobuf or
   Verilator code, and that libnpu.so exports nothing but the C API. Prints the sizes.

usage: run_consumer_test.py BUILD_DIR SOURCE_DIR
       run_consumer_test.py --installed PREFIX SOURCE_DIR   (steps 2-4 against an SDK that is
       already installed, e.g. from the Debian packages: scripts/test-debs)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FORBIDDEN_LIBS = ("libonnx", "libprotobuf")


def run(cmd, env=None, cwd=None):
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def check_manifest(build, prefix, what, destdir=""):
    """Every file install_manifest.txt names is under the prefix (CMake lists them without
    DESTDIR) and exists under DESTDIR + prefix."""
    manifest = os.path.join(build, "install_manifest.txt")
    files = open(manifest).read().split()
    outside = [f for f in files if not f.startswith(prefix + "/")]
    missing = [f for f in files if not os.path.lexists(destdir + f)]
    if outside or missing:
        sys.exit(f"FAIL: {what}: outside {prefix}: {outside[:5]}; not under {destdir or '/'}: "
                 f"{missing[:5]}")
    print(f"install ({what}): {len(files)} files, all under {destdir}{prefix}")


def outputs_of(text):
    return [line for line in text.splitlines() if line.startswith("output ")]


def main():
    installed = sys.argv[1] == "--installed"
    args = sys.argv[2:4] if installed else sys.argv[1:3]
    build, source = map(os.path.abspath, args)
    tmp = tempfile.mkdtemp(prefix="npu-consumer-")
    try:
        if installed:
            prefix = build
        else:
            prefix = os.path.join(tmp, "prefix")
            run(["cmake", "--install", build, "--prefix", prefix])
            check_manifest(build, prefix, "--prefix")
            stage = os.path.join(tmp, "stage")
            run(["cmake", "--install", build, "--prefix", "/usr"],
                env=dict(os.environ, DESTDIR=stage))
            check_manifest(build, "/usr", "DESTDIR=stage --prefix /usr", stage)
            staged = sum(len(f) for _, _, f in os.walk(stage))
            manifest = os.path.join(build, "install_manifest.txt")
            if staged != len(set(open(manifest).read().split())):
                sys.exit(f"FAIL: DESTDIR holds {staged} files, the manifest names another number")

        # The environment of a user of the installed SDK: no build tree, default logging.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("NPU_") and k not in ("LD_LIBRARY_PATH",)}
        env["PATH"] = os.path.join(prefix, "bin") + ":" + env.get("PATH", "/usr/bin:/bin")
        image = os.path.join(tmp, "mlp.npuimg")
        run(["npu-compile", os.path.join(source, "tests/data/mlp.onnx"), "-o", image], env=env)

        # The reference: npu-run on the same input (x[i] = sin(i) / 2 as float32).
        import numpy as np
        x = (np.sin(np.arange(4 * 64, dtype=np.float64)) * 0.5).astype(np.float32).reshape(4, 64)
        np.save(os.path.join(tmp, "x.npy"), x)
        run(["npu-run", image, "--input", os.path.join(tmp, "x.npy"), "--output-dir", tmp],
            env=env)
        ref = np.load(os.path.join(tmp, "output_0.npy"))
        expected = "output 0: " + "x".join(map(str, ref.shape)) + "".join(
            " %.9g" % v for v in ref.reshape(-1).tolist())

        cmake_build = os.path.join(tmp, "consumer-cmake")
        run(["cmake", "-S", os.path.join(source, "tests/consumer"), "-B", cmake_build, "-G",
             "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"], env=env)
        run(["cmake", "--build", cmake_build], env=env)

        pc_build = os.path.join(tmp, "consumer-pkgconfig")
        os.makedirs(pc_build)
        pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "npu"], env=pc_env).stdout.split()
        libdir = run(["pkg-config", "--variable=libdir", "npu"], env=pc_env).stdout.strip()
        rpath = "-Wl,-rpath," + libdir
        run(["cc", "-O2", "-o", os.path.join(pc_build, "consumer_c"),
             os.path.join(source, "tests/consumer/consumer.c"), *flags, "-lm", rpath], env=pc_env)
        run(["c++", "-std=c++17", "-O2", "-o", os.path.join(pc_build, "consumer_cxx"),
             os.path.join(source, "tests/consumer/consumer.cc"), *flags, rpath], env=pc_env)

        libnpu = os.path.realpath(os.path.join(libdir, "libnpu.so"))
        for binary in ["consumer-cmake/consumer_c", "consumer-cmake/consumer_cxx",
                       "consumer-pkgconfig/consumer_c", "consumer-pkgconfig/consumer_cxx"]:
            path = os.path.join(tmp, binary)
            r = run([path, image, "sim"], env=env)
            if outputs_of(r.stdout) != [expected]:
                sys.exit(f"FAIL: {binary} on sim printed\n{r.stdout}\nnpu-run gave\n{expected}")
            if r.stderr:
                sys.exit(f"FAIL: {binary} wrote to stderr without NPU_LOG:\n{r.stderr}")
            check_links(binary, path)
            print(f"{binary}: {os.path.getsize(path)} bytes, runs mlp on sim = npu-run")
        # Logging is opt-in: NPU_LOG=device shows the device line (the plugin's categories
        # too: umd), an unknown word is named once.
        path = os.path.join(tmp, "consumer-cmake/consumer_c")
        r = run([path, image, "sim"], env=dict(env, NPU_LOG="device,umd"))
        if "[npu:device] opened sim" not in r.stderr or "[npu:umd]" not in r.stderr:
            sys.exit(f"FAIL: NPU_LOG=device,umd logged\n{r.stderr}")
        r = run([path, image, "sim"], env=dict(env, NPU_LOG="jobz"))
        if r.stderr.count("unknown category 'jobz'") != 1:
            sys.exit(f"FAIL: NPU_LOG=jobz logged\n{r.stderr}")
        print("NPU_LOG: device,umd logs the device and the plugin; an unknown word is named")
        check_links("libnpu.so", libnpu)
        exported = run(["nm", "-D", "--defined-only", libnpu]).stdout.split("\n")
        # Version nodes (type A) are not symbols; the private node holds the one C++ entry
        # libnpu-compiler.so shares (npu::c_api::fail, the last-error state).
        names = [line.split()[-1] for line in exported if line.strip() and line.split()[-2] != "A"]
        stray = [n for n in names
                 if not n.startswith("npu_") and n != "_ZN3npu5c_api4failERKNS_6StatusE@@NPU_PRIVATE_0"]
        if stray:
            sys.exit(f"FAIL: libnpu.so exports more than the C API: {stray[:10]}")
        print(f"libnpu.so: {os.path.getsize(libnpu)} bytes, exports {len(names)} symbols "
              f"({sum(n.startswith('npu_') for n in names)} C API functions)")
        print("consumer test passed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_links(what, path):
    ldd = run(["ldd", path]).stdout
    bad = [line.strip() for line in ldd.splitlines() if any(b in line for b in FORBIDDEN_LIBS)]
    if bad:
        sys.exit(f"FAIL: {what} links {bad}")
    syms = run(["nm", "-C", path]).stdout + run(["nm", "-D", "-C", path]).stdout
    for pattern in (r"[Vv]erilat", r"\bonnx::", r"google::protobuf"):
        hits = [line for line in syms.splitlines() if re.search(pattern, line)]
        if hits:
            sys.exit(f"FAIL: {what} carries {len(hits)} symbols matching {pattern}: {hits[:3]}")


if __name__ == "__main__":
    main()
