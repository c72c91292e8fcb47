# A stand-in for LibTorch's CMake package, for the tool's tests of CMake
# projects: the stub headers (test/stubs), as an imported target the way
# LibTorch's package gives them (its folders reach compile commands as
# -isystem). The stubs declare and never define, so nothing is linked: a
# "link" only touches its output, and a build proves every source compiles.
# The target names a (empty) library file, as LibTorch's does, so CMake's
# codemodel shows which targets link it.
# Its include folder holds the stub <torch/torch.h> alone (a link to
# test/stubs/torch), as LibTorch's holds no <fabric/fabric.h>.
set(_fabric_test_stubs "${CMAKE_CURRENT_LIST_DIR}/include")
if(NOT TARGET torch)
  add_library(torch SHARED IMPORTED)
  set_target_properties(torch PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fabric_test_stubs}"
                                         IMPORTED_LOCATION "${CMAKE_CURRENT_LIST_DIR}/libtorch.so")
endif()
set(TORCH_LIBRARIES torch)
set(TORCH_INCLUDE_DIRS "${_fabric_test_stubs}")
set(Torch_FOUND TRUE)
set(CMAKE_CXX_LINK_EXECUTABLE "<CMAKE_COMMAND> -E touch <TARGET>")
