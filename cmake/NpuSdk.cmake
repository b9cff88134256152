# The installable SDK: libnpu.so (the runtime's C API), libnpu-compiler.so (the compiler's C
# API), their public headers under include/npu/, the CMake package (find_package(npu) ->
# npu::runtime, npu::compiler) and pkg-config files (npu, npu-compiler).
include(CMakePackageConfigHelpers)

# Everything that goes into libnpu.so is built with hidden symbols; the version script then
# exports the C API only (C++ symbols of the stack never leak into an application).
foreach(t npu_runtime npu_scheduler npu_hal npu_status npu_c_common npu_driver npu_log
          npu_image npu_host_kernels npu_compiler)
  set_target_properties(${t} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endforeach()

set(NPU_SOVERSION 0)
add_library(npu_shared SHARED ${CMAKE_CURRENT_LIST_DIR}/sdk_library.cc)
set_target_properties(npu_shared PROPERTIES
  OUTPUT_NAME npu EXPORT_NAME runtime
  VERSION ${PROJECT_VERSION} SOVERSION ${NPU_SOVERSION}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
  # The simulator plugin sits in LIBDIR/npu next to it (installed) or in build/lib/npu.
  INSTALL_RPATH "$ORIGIN/npu"
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/libnpu.map)
# The runtime whole (its C API); c_api.cc pulls in npu_status's c_common.o (the C state).
target_link_libraries(npu_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,npu_runtime>")
target_link_options(npu_shared PRIVATE -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/libnpu.map
                    -Wl,--no-undefined)
target_include_directories(npu_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/hal/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/compiler/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
add_library(npu::runtime ALIAS npu_shared)

add_library(npu_compiler_shared SHARED ${CMAKE_CURRENT_LIST_DIR}/sdk_library.cc)
set_target_properties(npu_compiler_shared PROPERTIES
  OUTPUT_NAME npu-compiler EXPORT_NAME compiler
  VERSION ${PROJECT_VERSION} SOVERSION ${NPU_SOVERSION}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
  INSTALL_RPATH "$ORIGIN"
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/libnpu-compiler.map)
# The compiler archive whole, with its dependencies listed here rather than through the
# npu_compiler target, which also brings npu_c_common: that state (the last error) must come
# from libnpu.so, one copy per process (ld would otherwise prefer the archive's copy).
# libnpu.so last: the toolchain links --as-needed, which drops a shared library that no
# object before it references.
target_link_libraries(npu_compiler_shared PRIVATE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,$<TARGET_FILE:npu_compiler>>"
  npu_host_kernels npu_image npu_status npu_sim_model onnx onnx_proto protobuf::libprotobuf
  PUBLIC npu_shared)
add_dependencies(npu_compiler_shared npu_compiler)
target_link_options(npu_compiler_shared PRIVATE
  -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/libnpu-compiler.map -Wl,--no-undefined)
add_library(npu::compiler ALIAS npu_compiler_shared)

install(TARGETS npu_shared EXPORT npuTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS npu_compiler_shared EXPORT npuTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT compiler NAMELINK_COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/hal/include/npu/c_common.h
              ${PROJECT_SOURCE_DIR}/runtime/include/npu/npu.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/npu COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/npu/runtime/c_api.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/npu/runtime COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/compiler/include/npu/compiler/c_api.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/npu/compiler COMPONENT dev)

set(NPU_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/npu)
install(EXPORT npuTargets NAMESPACE npu:: DESTINATION ${NPU_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/npuConfig.cmake.in
  ${CMAKE_BINARY_DIR}/sdk/npuConfig.cmake INSTALL_DESTINATION ${NPU_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sdk/npuConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sdk/npuConfig.cmake ${CMAKE_BINARY_DIR}/sdk/npuConfigVersion.cmake
        DESTINATION ${NPU_CMAKE_DIR} COMPONENT dev)

# Relocatable .pc files: the prefix is found from the file's own place.
file(RELATIVE_PATH NPU_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" NPU_PC_TO_PREFIX "${NPU_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/npu.pc.in ${CMAKE_BINARY_DIR}/sdk/npu.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/npu-compiler.pc.in ${CMAKE_BINARY_DIR}/sdk/npu-compiler.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sdk/npu.pc ${CMAKE_BINARY_DIR}/sdk/npu-compiler.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
