# A stand-in for LibTorch's CMake package, for the tool's tests of CMake
# projects: the stub headers (test/stubs), as an imported target the way
# LibTorch's package gives them (its folders reach compile commands as
# -isystem). The stubs declare and never define, so nothing is linked: a
# "link" only touches its output, and a build proves every source compiles.
get_filename_component(_fabric_test_stubs "${CMAKE_CURRENT_LIST_DIR}/../../../stubs" ABSOLUTE)
if(NOT TARGET torch)
  add_library(torch INTERFACE IMPORTED)
  set_target_properties(torch PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fabric_test_stubs}")
endif()
set(TORCH_LIBRARIES torch)
set(TORCH_INCLUDE_DIRS "${_fabric_test_stubs}")
set(Torch_FOUND TRUE)
set(CMAKE_CXX_LINK_EXECUTABLE "<CMAKE_COMMAND> -E touch <TARGET>")
