// The shared libraries of the SDK (libnpu.so, libnpu-compiler.so) are made of the static
// component libraries linked whole (cmake/NpuSdk.cmake); this file only gives each a source.
