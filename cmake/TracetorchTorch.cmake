# Finds the libtorch of the interpreter the agent is built for (TRACETORCH_PYTHON), never another
# one that happens to be on the search path:
#
#   tracetorch_find_torch()
#
# asks the interpreter for its torch (version, torch.utils.cmake_prefix_path, the C++ ABI flag and
# whether it was built with CUDA), finds TorchConfig.cmake under that prefix when the wheel ships
# one (pip, conda) and in the default places otherwise (Debian's python3-torch keeps it in
# /usr/lib/<arch>/cmake/Torch), and stops with one clear message when what it found cannot work:
# a libtorch of another version than the interpreter's torch, or a torch built with the pre-C++11
# ABI (_GLIBCXX_USE_CXX11_ABI=0), which the distribution's abseil and spdlog (C++11 ABI) cannot be
# linked with. A macro: sets, in the caller's scope, what find_package(Torch) sets, plus
#   TRACETORCH_TORCH_VERSION     the interpreter's torch.__version__
#   TRACETORCH_TORCH_HAS_CUDA    ON when the interpreter's torch was built with CUDA
#   TRACETORCH_TORCH_LIB_DIR     the folder of libtorch_python (and libc10_cuda)
macro(tracetorch_find_torch)
  execute_process(
    COMMAND "${TRACETORCH_PYTHON}" -c
            "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(int(torch.version.cuda is not None)); import os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))"
    OUTPUT_VARIABLE _tt_out ERROR_VARIABLE _tt_err RESULT_VARIABLE _tt_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _tt_rc EQUAL 0)
    message(FATAL_ERROR "tracetorch: ${TRACETORCH_PYTHON} cannot import torch (set "
                        "-DTRACETORCH_PYTHON=<the interpreter that has torch>):\n${_tt_err}")
  endif()
  string(REPLACE "\n" ";" _tt_out "${_tt_out}")
  list(GET _tt_out 0 _tt_py_version)
  list(GET _tt_out 1 _tt_py_prefix)
  list(GET _tt_out 2 _tt_py_abi)
  list(GET _tt_out 3 _tt_py_cuda)
  list(GET _tt_out 4 _tt_py_lib_dir)
  if(_tt_py_abi STREQUAL "0")
    message(FATAL_ERROR
      "tracetorch: the torch of ${TRACETORCH_PYTHON} (${_tt_py_version}) was built with the pre-C++11 "
      "ABI (_GLIBCXX_USE_CXX11_ABI=0); the agent links the distribution's abseil and spdlog, "
      "built with the C++11 ABI, and the two cannot be mixed. Use a torch built with the C++11 "
      "ABI (Debian/Ubuntu python3-torch, conda, or a recent pip wheel: they use the C++11 ABI).")
  endif()
  # Debian's libtorch config (its Caffe2Config) looks for protobuf, a dependency of that torch
  # build, not of ours: an agent-only configure with -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON still
  # lets torch find it. Our own code links no protobuf (tools/check_layers, "links").
  set(_tt_no_protobuf "${CMAKE_DISABLE_FIND_PACKAGE_Protobuf}")
  set(CMAKE_DISABLE_FIND_PACKAGE_Protobuf OFF)
  if(_tt_py_cuda STREQUAL "1")
    # A CUDA torch's Caffe2Config enables the CUDA language. We compile no CUDA sources: C++17 for
    # it (CMake 3.25 knows no C++20 flags for nvcc 13, and torch would copy our CXX standard), and
    # an architecture list so that it does not try to run a program on a GPU to find one.
    if(NOT DEFINED CMAKE_CUDA_STANDARD)
      set(CMAKE_CUDA_STANDARD 17)
    endif()
    if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
      set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
    endif()
    # Its config also runs find_package(Python): the interpreter we build for, not the first
    # python3 on PATH.
    if(NOT DEFINED Python_EXECUTABLE)
      set(Python_EXECUTABLE "${TRACETORCH_PYTHON}")
    endif()
  endif()
  if(EXISTS "${_tt_py_prefix}/Torch/TorchConfig.cmake")
    # TorchConfig finds Caffe2Config and its libraries (torch, c10, c10_cuda) with PATHS, which
    # come after the system's folders: with the torch's own folder first on CMAKE_PREFIX_PATH, a
    # pip torch never picks up Debian's libtorch or Caffe2Config (python3-torch 1.13) instead.
    get_filename_component(_tt_py_root "${_tt_py_lib_dir}" DIRECTORY)
    set(_tt_prefix_path "${CMAKE_PREFIX_PATH}")
    list(PREPEND CMAKE_PREFIX_PATH "${_tt_py_root}" "${_tt_py_prefix}")
    find_package(Torch REQUIRED PATHS "${_tt_py_prefix}/Torch" NO_DEFAULT_PATH)
    set(CMAKE_PREFIX_PATH "${_tt_prefix_path}")
  else()
    find_package(Torch REQUIRED)
  endif()
  set(CMAKE_DISABLE_FIND_PACKAGE_Protobuf "${_tt_no_protobuf}")
  # 2.11.0+cu130 -> 2.11.0; 1.13.0a0 -> 1.13.0.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" _tt_py_release "${_tt_py_version}")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" _tt_found_release "${Torch_VERSION}")
  if(NOT _tt_py_release STREQUAL _tt_found_release)
    message(FATAL_ERROR
      "tracetorch: found libtorch ${Torch_VERSION} (${Torch_DIR}), but the torch of "
      "${TRACETORCH_PYTHON} is ${_tt_py_version} (${_tt_py_prefix}); an extension built against one "
      "cannot load into the other. Remove the stray libtorch from CMAKE_PREFIX_PATH or set "
      "-DTRACETORCH_PYTHON.")
  endif()
  if(_tt_py_cuda STREQUAL "1")
    set(TRACETORCH_TORCH_HAS_CUDA ON)
  else()
    set(TRACETORCH_TORCH_HAS_CUDA OFF)
  endif()
  if(EXISTS "${_tt_py_lib_dir}/libtorch_python.so")
    set(TRACETORCH_TORCH_LIB_DIR "${_tt_py_lib_dir}")
  else()  # Debian: the libraries live in the system's library folder.
    set(TRACETORCH_TORCH_LIB_DIR "${TORCH_INSTALL_PREFIX}/lib")
  endif()
  set(TRACETORCH_TORCH_VERSION "${_tt_py_version}")
  message(STATUS "tracetorch: torch ${_tt_py_version} of ${TRACETORCH_PYTHON} (${Torch_DIR})")
endmacro()
