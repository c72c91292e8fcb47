# A stand-in for the Fabric runtime's CMake package (see TorchConfig.cmake
# beside it): Fabric::fabric with the stub <fabric/fabric.h> and LibTorch.
find_package(Torch REQUIRED CONFIG PATHS "${CMAKE_CURRENT_LIST_DIR}" NO_DEFAULT_PATH)
if(NOT TARGET Fabric::fabric)
  add_library(Fabric::fabric INTERFACE IMPORTED)
  set_target_properties(Fabric::fabric PROPERTIES INTERFACE_LINK_LIBRARIES torch)
endif()
set(Fabric_FOUND TRUE)
