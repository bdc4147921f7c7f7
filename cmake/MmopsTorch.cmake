# Locate libtorch (from the python that has torch unless Torch_DIR / CMAKE_PREFIX_PATH
# already point at it), decide whether the CUDA kernels are built, and pick the
# CUDA architectures. Sets MMOPS_PYTHON and MMOPS_CUDA_ENABLED.

if(NOT MMOPS_PYTHON)
  find_program(_mmops_python NAMES python3 python)
  set(MMOPS_PYTHON "${_mmops_python}" CACHE FILEPATH
      "Python interpreter that has torch" FORCE)
endif()

# Ask python where torch keeps its CMake files, unless the caller told us.
if(NOT Torch_DIR AND MMOPS_PYTHON)
  execute_process(
    COMMAND "${MMOPS_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _mmops_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mmops_torch_rc ERROR_QUIET)
  if(_mmops_torch_rc EQUAL 0 AND EXISTS "${_mmops_torch_prefix}/Torch")
    set(Torch_DIR "${_mmops_torch_prefix}/Torch" CACHE PATH "libtorch CMake config" FORCE)
  endif()
endif()

# Does this torch have CUDA? Look for libtorch_cuda next to libtorch, so we know
# before find_package(Torch), which itself needs the CUDA toolkit for a CUDA build.
set(_mmops_torch_has_cuda FALSE)
if(Torch_DIR)
  file(GLOB _mmops_torch_cuda_lib "${Torch_DIR}/../../../lib/libtorch_cuda.*")
  if(_mmops_torch_cuda_lib)
    set(_mmops_torch_has_cuda TRUE)
  endif()
endif()

find_program(MMOPS_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda/bin)

string(TOUPPER "${MMOPS_WITH_CUDA}" _mmops_cuda_mode)
if(_mmops_cuda_mode STREQUAL "AUTO")
  if(_mmops_torch_has_cuda AND MMOPS_NVCC)
    set(MMOPS_CUDA_ENABLED ON)
  else()
    set(MMOPS_CUDA_ENABLED OFF)
  endif()
elseif(_mmops_cuda_mode STREQUAL "ON")
  if(NOT _mmops_torch_has_cuda)
    message(FATAL_ERROR "MMOPS_WITH_CUDA=ON but the torch found (${Torch_DIR}) has no CUDA")
  endif()
  if(NOT MMOPS_NVCC)
    message(FATAL_ERROR "MMOPS_WITH_CUDA=ON but nvcc was not found (set CUDA_HOME)")
  endif()
  set(MMOPS_CUDA_ENABLED ON)
elseif(_mmops_cuda_mode STREQUAL "OFF")
  set(MMOPS_CUDA_ENABLED OFF)
else()
  message(FATAL_ERROR "MMOPS_WITH_CUDA must be ON, OFF or AUTO, got '${MMOPS_WITH_CUDA}'")
endif()

if(MMOPS_CUDA_ENABLED)
  # torch's CMake turns TORCH_CUDA_ARCH_LIST into -gencode flags. Default: the
  # GPUs of this machine, else sm_90 (the H200) so a GPU-less CI still compiles.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
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
    set(TORCH_CUDA_ARCH_LIST "${_mmops_arch}" CACHE STRING "CUDA architectures to build for")
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
endif()

# A CUDA torch's CMake config looks for the toolkit even when mmops builds no
# CUDA code (MMOPS_WITH_CUDA=OFF, e.g. the sanitizer build): point it there.
if(NOT MMOPS_CUDA_ENABLED AND _mmops_torch_has_cuda AND MMOPS_NVCC AND NOT CUDA_TOOLKIT_ROOT_DIR)
  get_filename_component(_mmops_cuda_root "${MMOPS_NVCC}/../.." ABSOLUTE)
  set(CUDA_TOOLKIT_ROOT_DIR "${_mmops_cuda_root}" CACHE PATH "CUDA toolkit")
endif()

find_package(Torch REQUIRED)
