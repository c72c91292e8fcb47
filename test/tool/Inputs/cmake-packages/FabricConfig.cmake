# A stand-in for the Fabric runtime's CMake package (see TorchConfig.cmake
# beside it): Fabric::fabric with the stub <fabric/fabric.h> and LibTorch.
find_package(Torch REQUIRED CONFIG PATHS "${CMAKE_CURRENT_LIST_DIR}" NO_DEFAULT_PATH)
if(NOT TARGET Fabric::fabric)
  add_library(Fabric::fabric SHARED IMPORTED)
  set_target_properties(Fabric::fabric PROPERTIES INTERFACE_LINK_LIBRARIES torch
                                                  INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/fabric-include"
                                                  IMPORTED_LOCATION "${CMAKE_CURRENT_LIST_DIR}/libfabric.so")
endif()
set(Fabric_FOUND TRUE)
