# cmake --install: headers, the library, its GPU modules, a package config, so that
# find_package(onlinenorm CONFIG) gives onlinenorm::onlinenorm, and onlinenorm.pc for
# pkg-config (lib/pkgconfig).
include(CMakePackageConfigHelpers)

install(TARGETS onlinenorm onlinenorm_headers EXPORT onlinenormTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/onlinenorm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT onlinenormTargets NAMESPACE onlinenorm::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/onlinenorm)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/onlinenormConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/onlinenormConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/onlinenorm)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/onlinenormConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/onlinenormConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/onlinenormConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/onlinenorm)

# pkg-config: paths relative to the .pc file's folder (${pcfiledir}) unless the install dirs
# were given as absolute paths.
set(_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ONORM_PC_TO_PREFIX ".")
  set(ONORM_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH ONORM_PC_TO_PREFIX "/_prefix/${_pc_dir}" "/_prefix")
  string(REGEX REPLACE "/$" "" ONORM_PC_TO_PREFIX "${ONORM_PC_TO_PREFIX}")
  set(ONORM_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(ONORM_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(ONORM_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/onlinenorm.pc.in ${CMAKE_CURRENT_BINARY_DIR}/onlinenorm.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/onlinenorm.pc DESTINATION ${_pc_dir})
# onlinenorm::nccl, where it was built (its header is installed with the others).
if(TARGET onlinenorm_nccl)
  install(TARGETS onlinenorm_nccl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
