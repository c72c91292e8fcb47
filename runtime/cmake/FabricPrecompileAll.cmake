# Build speed only, for tools that build a user's project (fabricize verify,
# the end-to-end tests): given as -DCMAKE_PROJECT_INCLUDE=<this file>, it
# makes every target of every directory with 3 or more C++ sources compile
# through a precompiled <torch/torch.h> once the project's own
# CMakeLists.txt has run. (Building the PCH costs about one compile of
# <torch/torch.h>: it only pays from the third source on.) The program built
# is unchanged.
#
# FABRIC_PRECOMPILE_MIN_SOURCES (a CMake variable, else the environment's)
# lowers that threshold where PCHs are shared between builds, so that one
# costs nothing per target: the tests' builds of user projects compile each
# kind of PCH once for all of them (test/support/shared_pch.py) and set it
# to 1 (a 2-source target compiled ~50 s per source without it under ctest,
# ~8 s with it).
function(_fabric_precompile_all directory)
  set(minimum 3)
  if(DEFINED FABRIC_PRECOMPILE_MIN_SOURCES)
    set(minimum ${FABRIC_PRECOMPILE_MIN_SOURCES})
  elseif(DEFINED ENV{FABRIC_PRECOMPILE_MIN_SOURCES})
    set(minimum $ENV{FABRIC_PRECOMPILE_MIN_SOURCES})
  endif()
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(cpp|cc|cxx|C)$")
    list(LENGTH sources count)
    if((type STREQUAL "EXECUTABLE" OR type MATCHES "_LIBRARY$") AND count GREATER_EQUAL minimum)
      target_precompile_headers(${target} PRIVATE <torch/torch.h>)
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    _fabric_precompile_all(${subdirectory})
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _fabric_precompile_all ${CMAKE_SOURCE_DIR})
