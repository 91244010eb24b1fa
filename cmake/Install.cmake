# cmake --install: headers, the library, its GPU modules and a package config, so that
# find_package(onlinenorm CONFIG) gives onlinenorm::onlinenorm.
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
