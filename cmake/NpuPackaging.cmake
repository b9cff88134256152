# Debian packages (cpack -G DEB, from the build directory): one per install component.
#   libnpu0          runtime: libnpu.so.0 and the simulator plugin (lib/npu/libnpu-sim.so)
#   libnpu-compiler0 compiler: libnpu-compiler.so.0 (ONNX at run time)
#   libnpu-dev       dev: headers, the libnpu.so/libnpu-compiler.so links, CMake package, .pc
#   npu-tools        tools: npu-compile, npu-run, npu-smi, ... and the udev/memlock files
# Installed under /usr; dependencies on Debian libraries come from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME npu)
set(CPACK_PACKAGE_VENDOR "npu project")
set(CPACK_PACKAGE_CONTACT "npu project <npu@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "An open NPU: runtime, compiler, simulators and tools")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime compiler dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The plugin and the tools find libraries through their RUNPATH ($ORIGIN-relative).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libnpu0)
set(CPACK_DEBIAN_COMPILER_PACKAGE_NAME libnpu-compiler0)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libnpu-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME npu-tools)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_COMPILER_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
# Inter-package dependencies (Depends: libnpu0 (= VERSION), ...) from the component ones.
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_COMPILER_DEPENDS runtime)
set(CPACK_COMPONENT_DEV_DEPENDS runtime compiler)
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
include(CPack)
