# Compile through ccache when it is installed (MMOPS_USE_CCACHE, default ON),
# unless CMAKE_<LANG>_COMPILER_LAUNCHER is already set (cache, variable or
# environment): a rebuild, or a fresh build directory of the same tree, then
# takes seconds instead of minutes.
#
# Two settings make a fresh build directory hit (each only when the user has not
# chosen it at configure time: base_dir in the environment or ccache.conf,
# CCACHE_HASHDIR / CCACHE_NOHASHDIR in the environment):
#  - base_dir: ccache rewrites absolute paths under it (the sources, the
#    generated include/ of the build directory) relative to the build directory.
#    Default: the parent of the source tree, so sibling checkouts share entries.
#  - hash_dir=false for CUDA: ccache takes nvcc's -gencode for a -g (debug info)
#    option and then hashes the build directory into every .cu key, so without it
#    each new build directory misses every .cu file. mmops' CUDA flags carry no
#    host debug info; -lineinfo names the sources relative to the build dir.
# C/C++ also get the sloppiness that lets ccache cache precompiled headers.
option(MMOPS_USE_CCACHE "Compile through ccache when it is installed" ON)

if(MMOPS_USE_CCACHE)
  find_program(MMOPS_CCACHE ccache)
endif()
if(MMOPS_USE_CCACHE AND MMOPS_CCACHE)
  function(_mmops_ccache_config key out)
    execute_process(COMMAND ${MMOPS_CCACHE} --get-config ${key}
                    OUTPUT_VARIABLE _value OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    set(${out} "${_value}" PARENT_SCOPE)
  endfunction()

  set(_mmops_ccache_env "")
  _mmops_ccache_config(base_dir _mmops_base_dir)
  if(_mmops_base_dir STREQUAL "")
    get_filename_component(_mmops_base_dir "${PROJECT_SOURCE_DIR}/.." ABSOLUTE)
    list(APPEND _mmops_ccache_env "CCACHE_BASEDIR=${_mmops_base_dir}")
  endif()
  set(_mmops_cuda_env ${_mmops_ccache_env})
  if(NOT DEFINED ENV{CCACHE_HASHDIR} AND NOT DEFINED ENV{CCACHE_NOHASHDIR})
    list(APPEND _mmops_cuda_env "CCACHE_NOHASHDIR=1")
  endif()
  # the C++ tests' precompiled header (MMOPS_PRECOMPILED_HEADERS) is cached only
  # with these sloppiness settings (ccache's documented ones for PCH)
  _mmops_ccache_config(sloppiness _mmops_sloppiness)
  if(_mmops_sloppiness STREQUAL "" AND NOT DEFINED ENV{CCACHE_SLOPPINESS})
    list(APPEND _mmops_ccache_env "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime")
  endif()

  set(_mmops_launched "")
  foreach(_lang C CXX CUDA)
    if(DEFINED CMAKE_${_lang}_COMPILER_LAUNCHER OR DEFINED ENV{CMAKE_${_lang}_COMPILER_LAUNCHER})
      continue()  # the user's choice
    endif()
    set(_env ${_mmops_ccache_env})
    if(_lang STREQUAL "CUDA")
      set(_env ${_mmops_cuda_env})
    endif()
    if(_env)
      set(CMAKE_${_lang}_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_env} ${MMOPS_CCACHE})
    else()
      set(CMAKE_${_lang}_COMPILER_LAUNCHER ${MMOPS_CCACHE})
    endif()
    list(APPEND _mmops_launched ${_lang})
  endforeach()
  if(_mmops_launched)
    list(JOIN _mmops_launched ", " _mmops_launched)
    message(STATUS "mmops: compiling ${_mmops_launched} through ${MMOPS_CCACHE} (base_dir ${_mmops_base_dir}; "
                   "-DMMOPS_USE_CCACHE=OFF to turn it off)")
  endif()
endif()
