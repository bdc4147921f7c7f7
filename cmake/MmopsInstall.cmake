# Install rules of libmmops.so, its headers, CMake package and build info, in
# one of two layouts (the loader, python/mmops/_loader.py, finds both):
#   cmake --install build --prefix P   P/lib/libmmops.so, P/include/mmops, P/lib/cmake/mmops,
#                                      P/python/mmops (the Python package)
#   pip install . (scikit-build-core)  <site-packages>/mmops/{lib,include} beside the
#                                      Python package, which pyproject.toml adds
# An installed library depends on no path of the build machine: its RUNPATH is
# relative to $ORIGIN (the wheel: torch's own folders in site-packages) or just
# $ORIGIN (a prefix: its users link libtorch themselves, and Python has loaded
# torch before it loads mmops).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  # site-packages/mmops/lib -> site-packages/torch/lib (and the CUDA runtime of
  # torch's wheel, site-packages/nvidia/<pkg>/lib) when mmops has CUDA code.
  file(RELATIVE_PATH _mmops_site_from_lib "/site/mmops/${CMAKE_INSTALL_LIBDIR}" "/site")
  string(REGEX REPLACE "/$" "" _mmops_site_from_lib "${_mmops_site_from_lib}")
  get_filename_component(_mmops_torch_site "${_mmops_torch_lib_dir}/../.." ABSOLUTE)
  set(_mmops_rpath "$ORIGIN" "$ORIGIN/${_mmops_site_from_lib}/torch/lib")
  if(MMOPS_CUDA_ENABLED)
    file(GLOB _mmops_cudart "${_mmops_torch_site}/nvidia/*/lib/libcudart.so*")
    foreach(_lib IN LISTS _mmops_cudart)
      get_filename_component(_dir "${_lib}" DIRECTORY)
      file(RELATIVE_PATH _dir "${_mmops_torch_site}" "${_dir}")
      list(APPEND _mmops_rpath "$ORIGIN/${_mmops_site_from_lib}/${_dir}")
    endforeach()
    list(REMOVE_DUPLICATES _mmops_rpath)
  endif()
  # One file: a wheel (a zip) cannot hold the libmmops.so -> .so.0 -> .so.0.1.0 links.
  set_target_properties(mmops PROPERTIES INSTALL_RPATH "${_mmops_rpath}")
else()
  set_target_properties(mmops PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH "$ORIGIN")
endif()
# Not the link folders (libtorch's, MKL's /lib/intel64...): they are where the
# build machine keeps them.
set_target_properties(mmops PROPERTIES INSTALL_RPATH_USE_LINK_PATH FALSE)

install(TARGETS mmops EXPORT mmopsTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${MMOPS_BUILD_INFO} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/mmops DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${MMOPS_GENERATED_INCLUDE_DIR}/mmops/mmops.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mmops)
install(EXPORT mmopsTargets NAMESPACE mmops:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mmops)
configure_package_config_file(cmake/mmopsConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mmopsConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mmops)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mmopsConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/mmopsConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mmopsConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mmops)
if(NOT SKBUILD)
  # <prefix>/python/mmops finds <prefix>/lib*/libmmops.so
  install(DIRECTORY python/mmops DESTINATION python
    PATTERN "__pycache__" EXCLUDE)
endif()
