# Installs the layer libraries, their public headers and a package config, so an embedder
# writes find_package(Sluice) and links Sluice::ep (or any other layer); and the C API
# (Sluice::c, libsluice_c.so, with capi/sluice_c_api.h and a pkg-config file sluice.pc).
include(CMakePackageConfigHelpers)

set(_sluice_targets sluice_core sluice_ep_api sluice_ep_cuda sluice_ep_ccl sluice_ep sluice_vm sluice_ops
  ${SLUICE_FRAMEWORK_LIBRARIES} sluice_framework)
if(TARGET sluice_ops_cuda)  # the device code of the cuda kernels, linked into sluice_ops
  list(APPEND _sluice_targets sluice_ops_cuda)
endif()
if(TARGET sluice_c)  # the C API's shared library, its header and its pkg-config file
  list(APPEND _sluice_targets sluice_c)
  install(FILES ${PROJECT_SOURCE_DIR}/capi/sluice_c_api.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice/capi)
  install(FILES ${PROJECT_BINARY_DIR}/sluice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
install(TARGETS ${_sluice_targets} EXPORT SluiceTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

foreach(_dir core ep vm ops framework)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice/${_dir}
    FILES_MATCHING PATTERN "*.h"
    PATTERN "internal" EXCLUDE  # private: no public header includes one (check_layering.sh)
    PATTERN "mpi" EXCLUDE PATTERN "nccl" EXCLUDE)  # the ccl backends: private as well
endforeach()

set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Sluice)
install(EXPORT SluiceTargets NAMESPACE Sluice:: DESTINATION ${_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SluiceConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SluiceConfig.cmake ${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake
  DESTINATION ${_cmake_dir})
