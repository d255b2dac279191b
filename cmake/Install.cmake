# Install rules: headers, static libraries and a CMake package (find_package(nnc)).
include(CMakePackageConfigHelpers)

set(NNC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nnc)

install(TARGETS nnc_ir nnc_passes nnc_codegen nnc_interp nnc_runtime_core nnc_runtime nnc_frontend
                nnc_onnx_proto nnc_runtime_c nnc_driver nnc_train
        EXPORT nncTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nnc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The runtime core's headers: what a deployed model's runner includes.
# (OpenCLInternal.h is the OpenCL launch list's own, over <CL/cl.h>: not installed.)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/core/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nnc/runtime/core
        FILES_MATCHING PATTERN "*.h" PATTERN "OpenCLInternal.h" EXCLUDE)
install(EXPORT nncTargets NAMESPACE nnc:: DESTINATION ${NNC_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nncConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/nncConfig.cmake
                              INSTALL_DESTINATION ${NNC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nncConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nncConfig.cmake ${PROJECT_BINARY_DIR}/nncConfigVersion.cmake
        DESTINATION ${NNC_INSTALL_CMAKEDIR})
