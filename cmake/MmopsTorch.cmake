# Locate libtorch (from the python that has torch unless Torch_DIR / CMAKE_PREFIX_PATH
# already point at it), decide whether the CUDA kernels are built, and pick the
# CUDA architectures. Sets MMOPS_PYTHON, MMOPS_CUDA_ENABLED and MMOPS_BUILD_INFO
# (a JSON file next to libmmops.so: what it was built for, read by python/mmops/_loader.py).

# Under pip (scikit-build-core) the interpreter running pip is the one to build for.
if(NOT MMOPS_PYTHON)
  if(SKBUILD AND Python_EXECUTABLE)
    set(_mmops_python "${Python_EXECUTABLE}")
  else()
    find_program(_mmops_python NAMES python3 python)
  endif()
  set(MMOPS_PYTHON "${_mmops_python}" CACHE FILEPATH
      "Python interpreter that has torch" FORCE)
endif()

# Ask python where torch keeps its CMake files and what it is, unless the caller
# pointed at libtorch (Torch_DIR) and there is no python with torch.
set(_mmops_torch_py_version "")
set(_mmops_torch_py_cuda "")
if(MMOPS_PYTHON)
  execute_process(
    COMMAND "${MMOPS_PYTHON}" -c
      "import torch; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(torch.version.cuda or '')"
    OUTPUT_VARIABLE _mmops_torch_out OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _mmops_torch_err ERROR_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mmops_torch_rc)
  if(_mmops_torch_rc EQUAL 0)
    string(REPLACE "\n" ";" _mmops_torch_out "${_mmops_torch_out}")
    list(GET _mmops_torch_out 0 _mmops_torch_prefix)
    list(GET _mmops_torch_out 1 _mmops_torch_py_version)
    list(LENGTH _mmops_torch_out _mmops_n)
    if(_mmops_n GREATER 2)
      list(GET _mmops_torch_out 2 _mmops_torch_py_cuda)
    endif()
    if(NOT Torch_DIR AND EXISTS "${_mmops_torch_prefix}/Torch")
      set(Torch_DIR "${_mmops_torch_prefix}/Torch" CACHE PATH "libtorch CMake config" FORCE)
    endif()
  else()
    string(REGEX REPLACE ".*\n" "" _mmops_torch_err "${_mmops_torch_err}")  # the exception's line
  endif()
  if(NOT _mmops_torch_rc EQUAL 0 AND SKBUILD)
    message(FATAL_ERROR "mmops: torch is not importable from ${MMOPS_PYTHON} (${_mmops_torch_err}).\n"
      "mmops builds against the torch already installed (its C++ ABI must match), so pip must not "
      "build it in an isolated environment: install torch first, then run\n"
      "  pip install --no-build-isolation .\n"
      "(or pip wheel --no-build-isolation .). See docs/install.md.")
  endif()
endif()
if(NOT Torch_DIR)
  find_path(_mmops_torch_config TorchConfig.cmake PATH_SUFFIXES share/cmake/Torch)
  if(NOT _mmops_torch_config)
    message(FATAL_ERROR "mmops: torch was not found. ${MMOPS_PYTHON} cannot import it"
      " (${_mmops_torch_err}) and CMAKE_PREFIX_PATH names no libtorch. Install torch into that python,"
      " pass -DMMOPS_PYTHON=<a python with torch>, or -DCMAKE_PREFIX_PATH=<libtorch>.")
  endif()
endif()

# Does this torch have CUDA? Look for libtorch_cuda next to libtorch, so we know
# before find_package(Torch), which itself needs the CUDA toolkit for a CUDA build.
set(_mmops_torch_has_cuda FALSE)
set(_mmops_torch_lib_dir "")
if(Torch_DIR)
  get_filename_component(_mmops_torch_lib_dir "${Torch_DIR}/../../../lib" ABSOLUTE)
  file(GLOB _mmops_torch_cuda_lib "${_mmops_torch_lib_dir}/libtorch_cuda.*")
  if(_mmops_torch_cuda_lib)
    set(_mmops_torch_has_cuda TRUE)
  endif()
endif()

string(TOUPPER "${MMOPS_WITH_CUDA}" _mmops_cuda_mode)
if(NOT _mmops_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MMOPS_WITH_CUDA must be ON, OFF or AUTO, got '${MMOPS_WITH_CUDA}'")
endif()
if(NOT _mmops_cuda_mode STREQUAL "OFF")
  # The toolkit's own nvcc before PATH's: a wrapper script on PATH says nothing of
  # where the toolkit is.
  find_program(MMOPS_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
endif()

if(_mmops_cuda_mode STREQUAL "AUTO")
  if(_mmops_torch_has_cuda AND MMOPS_NVCC)
    set(MMOPS_CUDA_ENABLED ON)
  else()
    set(MMOPS_CUDA_ENABLED OFF)
    if(_mmops_torch_has_cuda)
      message(WARNING "mmops: torch has CUDA but nvcc was not found (not in $CUDA_HOME/bin, "
        "$CUDA_PATH/bin or /usr/local/cuda/bin, nor on PATH): building the CPU kernels only. "
        "Set CUDA_HOME to the CUDA toolkit for the CUDA kernels, or -DMMOPS_WITH_CUDA=OFF to silence this.")
    endif()
  endif()
elseif(_mmops_cuda_mode STREQUAL "ON")
  if(NOT _mmops_torch_has_cuda)
    message(FATAL_ERROR "MMOPS_WITH_CUDA=ON but the torch found (${Torch_DIR}) is a CPU-only build "
      "(no libtorch_cuda in ${_mmops_torch_lib_dir}); install a CUDA build of torch")
  endif()
  if(NOT MMOPS_NVCC)
    message(FATAL_ERROR "MMOPS_WITH_CUDA=ON but nvcc was not found (not in $CUDA_HOME/bin, "
      "$CUDA_PATH/bin or /usr/local/cuda/bin, nor on PATH): install the CUDA toolkit and set CUDA_HOME to it")
  endif()
  set(MMOPS_CUDA_ENABLED ON)
else()
  set(MMOPS_CUDA_ENABLED OFF)
endif()

if(MMOPS_CUDA_ENABLED)
  # torch's CMake turns TORCH_CUDA_ARCH_LIST into -gencode flags. The environment
  # variable wins (so that `TORCH_CUDA_ARCH_LIST=... pip install` works with a
  # kept build folder), then -DTORCH_CUDA_ARCH_LIST, then the GPUs of this
  # machine, else 9.0 (the H200) so a GPU-less CI still compiles.
  if(NOT "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
    set(TORCH_CUDA_ARCH_LIST "$ENV{TORCH_CUDA_ARCH_LIST}")
  elseif(NOT TORCH_CUDA_ARCH_LIST)
    set(_mmops_arch "")
    find_program(_mmops_nvidia_smi nvidia-smi)
    if(_mmops_nvidia_smi)
      execute_process(COMMAND ${_mmops_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
        OUTPUT_VARIABLE _mmops_caps OUTPUT_STRIP_TRAILING_WHITESPACE
        RESULT_VARIABLE _mmops_smi_rc ERROR_QUIET)
      if(_mmops_smi_rc EQUAL 0 AND _mmops_caps)
        string(REPLACE "\n" ";" _mmops_caps "${_mmops_caps}")
        list(REMOVE_DUPLICATES _mmops_caps)
        set(_mmops_arch "${_mmops_caps}")
      endif()
    endif()
    if(NOT _mmops_arch)
      set(_mmops_arch "9.0")
    endif()
    set(TORCH_CUDA_ARCH_LIST "${_mmops_arch}" CACHE STRING "CUDA architectures to build for" FORCE)
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${MMOPS_NVCC}")
  endif()
  # torch's CMake finds the toolkit through these (nvcc need not be on PATH).
  get_filename_component(_mmops_cuda_root "${MMOPS_NVCC}/../.." ABSOLUTE)
  if(NOT CUDA_TOOLKIT_ROOT_DIR)
    set(CUDA_TOOLKIT_ROOT_DIR "${_mmops_cuda_root}" CACHE PATH "CUDA toolkit")
  endif()
  if(NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT "${_mmops_cuda_root}")
  endif()
  enable_language(CUDA)
  # libtorch needs C++20; CMake 3.25 does not know nvcc's flag for it yet.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # torch picks architectures from TORCH_CUDA_ARCH_LIST and warns when CMake's
  # own CMAKE_CUDA_ARCHITECTURES is defined; targets set CUDA_ARCHITECTURES OFF.
  unset(CMAKE_CUDA_ARCHITECTURES CACHE)
  unset(CMAKE_CUDA_ARCHITECTURES)
elseif(_mmops_torch_has_cuda)
  # No CUDA code in mmops, but a CUDA torch's Caffe2Config.cmake looks for the
  # toolkit (public/cuda.cmake) and fails without one. That file returns at once
  # when torch::cudart exists (its include guard), so define it: libtorch_cuda
  # finds its own CUDA runtime, and mmops' CPU kernels need none. No nvcc, no
  # CUDA_HOME needed.
  if(NOT TARGET torch::cudart)
    add_library(torch::cudart INTERFACE IMPORTED)
  endif()
endif()

find_package(Torch REQUIRED)

# ---- What this build is for: mmops_build_info.json, installed next to libmmops.so ----
set(_mmops_torch_version "${_mmops_torch_py_version}")
if(NOT _mmops_torch_version)
  set(_mmops_torch_version "${Torch_VERSION}")
endif()
set(_mmops_torch_cuda "${_mmops_torch_py_cuda}")
if(NOT _mmops_torch_cuda AND _mmops_torch_has_cuda)
  set(_mmops_torch_cuda "unknown")
endif()
set(_mmops_arches "")
set(_mmops_nvcc_version "")
if(MMOPS_CUDA_ENABLED)
  # torch's CMake leaves the -gencode flags it made from TORCH_CUDA_ARCH_LIST here.
  string(REGEX MATCHALL "code=(sm|compute)_[0-9]+[a-z]?" _mmops_codes "${NVCC_FLAGS_EXTRA}")
  foreach(_code IN LISTS _mmops_codes)
    string(REPLACE "code=" "" _code "${_code}")
    list(APPEND _mmops_arches "\"${_code}\"")
  endforeach()
  list(REMOVE_DUPLICATES _mmops_arches)
  set(_mmops_nvcc_version "${CMAKE_CUDA_COMPILER_VERSION}")
endif()
list(JOIN _mmops_arches ", " _mmops_arches)
macro(_mmops_json_string var value)
  if("${value}" STREQUAL "")
    set(${var} "null")
  else()
    set(${var} "\"${value}\"")
  endif()
endmacro()
_mmops_json_string(_j_torch_cuda "${_mmops_torch_cuda}")
_mmops_json_string(_j_nvcc "${_mmops_nvcc_version}")
if(MMOPS_CUDA_ENABLED)
  set(_j_kernels true)
else()
  set(_j_kernels false)
endif()
set(MMOPS_BUILD_INFO "${PROJECT_BINARY_DIR}/mmops_build_info.json")
file(CONFIGURE OUTPUT "${MMOPS_BUILD_INFO}" CONTENT [=[{
  "mmops_version": "@PROJECT_VERSION@",
  "torch_version": "@_mmops_torch_version@",
  "torch_cuda": @_j_torch_cuda@,
  "cuda_kernels": @_j_kernels@,
  "nvcc_version": @_j_nvcc@,
  "cuda_arches": [@_mmops_arches@],
  "torch_cuda_arch_list": "@TORCH_CUDA_ARCH_LIST@",
  "build_type": "@CMAKE_BUILD_TYPE@",
  "cxx_compiler": "@CMAKE_CXX_COMPILER_ID@ @CMAKE_CXX_COMPILER_VERSION@"
}
]=] @ONLY)
