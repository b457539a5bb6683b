# Installs the selector library as a CMake package a downstream project
# consumes with find_package(topk CONFIG): headers, static libraries,
# libtopk_c.so and the exported targets topk::core, topk::cuda, topk::c.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(topk_package_targets topk_core topk_planner)
set_target_properties(topk_core PROPERTIES EXPORT_NAME core)
set_target_properties(topk_planner PROPERTIES EXPORT_NAME planner)
if(TOPK_HAVE_CUDA)
  list(APPEND topk_package_targets topk_cuda topk_c)
  set_target_properties(topk_cuda PROPERTIES EXPORT_NAME cuda)
  set_target_properties(topk_c PROPERTIES EXPORT_NAME c)
endif()

install(TARGETS ${topk_package_targets}
  EXPORT topkTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/include/topk
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

set(topk_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/topk)
install(EXPORT topkTargets NAMESPACE topk:: FILE topkTargets.cmake DESTINATION ${topk_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/topkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/topkConfig.cmake INSTALL_DESTINATION ${topk_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/topkConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/topkConfig.cmake ${PROJECT_BINARY_DIR}/topkConfigVersion.cmake
  DESTINATION ${topk_cmake_dir})
