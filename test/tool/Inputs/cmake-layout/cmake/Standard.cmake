# Included by the top-level CMakeLists.txt: a project's own CMake module.
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
