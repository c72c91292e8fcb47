# Build speed only, for tools that build a user's project (fabricize verify,
# the end-to-end tests): given as -DCMAKE_PROJECT_INCLUDE=<this file>, it
# makes every target of every directory with 3 or more C++ sources compile
# through a precompiled <torch/torch.h> once the project's own
# CMakeLists.txt has run. (Building the PCH costs about one compile of
# <torch/torch.h>: it only pays from the third source on.) The program built
# is unchanged.
function(_fabric_precompile_all directory)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(cpp|cc|cxx|C)$")
    list(LENGTH sources count)
    if((type STREQUAL "EXECUTABLE" OR type MATCHES "_LIBRARY$") AND count GREATER_EQUAL 3)
      target_precompile_headers(${target} PRIVATE <torch/torch.h>)
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    _fabric_precompile_all(${subdirectory})
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _fabric_precompile_all ${CMAKE_SOURCE_DIR})
