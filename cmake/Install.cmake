# What `cmake --install build --prefix P` puts under P:
#   bin/                 the tools
#   lib/                 libtq_runtime.so.1 (SONAME, public API only)
#   include/tq/          the runtime's C headers, the dialect's C++ headers,
#                        TableGen files and generated .inc files
#   lib/cmake/tqc/       tqcConfig.cmake: find_package(tqc) gives
#                        tqc::tq_runtime and TQC_TOOLS_DIR / TQC_TD_DIR
#   lib/pkgconfig/       tq_runtime.pc
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(TQC_TOOLS tq-aot tq-opt tq-run tq-bench tq-quant tq-gpu-check)
foreach(tool ${TQC_TOOLS})
  # Installed tools find the installed runtime next to them, and LLVM's
  # shared libraries (libMLIR, libLLVM) where the build found them.
  set_target_properties(${tool} PROPERTIES
    INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")
endforeach()
install(TARGETS ${TQC_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(TARGETS tq_runtime EXPORT tqcTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tq)

install(DIRECTORY ${TQC_SOURCE_DIR}/include/tq
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${TQC_BINARY_DIR}/include/tq
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.inc" PATTERN "*.h")

set(TQC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tqc)
install(EXPORT tqcTargets NAMESPACE tqc:: DESTINATION ${TQC_CMAKE_DIR})
configure_package_config_file(${TQC_SOURCE_DIR}/cmake/tqcConfig.cmake.in
  ${TQC_BINARY_DIR}/tqcConfig.cmake
  INSTALL_DESTINATION ${TQC_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${TQC_BINARY_DIR}/tqcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${TQC_BINARY_DIR}/tqcConfig.cmake
  ${TQC_BINARY_DIR}/tqcConfigVersion.cmake DESTINATION ${TQC_CMAKE_DIR})

configure_file(${TQC_SOURCE_DIR}/cmake/tq_runtime.pc.in
  ${TQC_BINARY_DIR}/tq_runtime.pc @ONLY)
install(FILES ${TQC_BINARY_DIR}/tq_runtime.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
