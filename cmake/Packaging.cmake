# Packages (CPack): a Debian package and a tarball of what `cmake --install`
# puts in place: fabricize, fabric-run, the runtime's headers, library and
# CMake package (find_package(Fabric)), the clang-tidy plugin and verify's
# preload library, all under /usr (lib/, not lib/<triplet>/: verify finds its
# preload and the Fabric package beside fabricize).
#
#   cpack --config build/CPackConfig.cmake -G DEB   (or TGZ)
#
# test/package/package_test.py (ctest package.deb) builds both, installs the
# Debian package into a throw-away root and migrates, builds and trains the
# bundled example against it alone (docs/install.md).
set(CPACK_PACKAGE_NAME "fabricize")
set(CPACK_PACKAGE_VENDOR "fabricize")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Distributed training for LibTorch: the Fabric runtime and the fabricize migration tool")
set(CPACK_PACKAGE_DESCRIPTION
    "fabricize migrates single-device LibTorch programs to the Fabric runtime (Lightning Fabric's \
model in C++ on c10d: launch, DDP, ZeRO, FSDP, precision, checkpoints, loggers); fabricize lint \
and the clang-tidy plugin report what a migration would change.")
set(CPACK_PACKAGE_CONTACT "fabricize developers <fabricize@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_GENERATOR "DEB;TGZ")
# The tarball unpacks to usr/...: extracted at / it is the Debian package's
# layout; anywhere else, add <dir>/usr to CMAKE_PREFIX_PATH.
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY OFF)
set(CPACK_SET_DESTDIR OFF)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
# The shared libraries (LLVM, Clang, LibTorch, ...) as dpkg-shlibdeps finds
# them; what users build against and what the tool parses with, by name:
# LibTorch's headers and CMake package (the runtime's find_dependency),
# Clang's builtin headers (fabricize parses with them), CMake.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(fabric_package_depends "cmake (>= 3.18)")
if(FABRIC_BUILD_RUNTIME)
  string(APPEND fabric_package_depends ", libtorch-dev, libgloo-dev")
endif()
if(FABRIC_BUILD_TOOL)
  string(APPEND fabric_package_depends ", libclang-common-${LLVM_VERSION_MAJOR}-dev")
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "clang-tidy-${LLVM_VERSION_MAJOR}, ninja-build, g++")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${fabric_package_depends}")
include(CPack)
