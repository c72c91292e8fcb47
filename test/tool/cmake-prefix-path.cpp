// A project that sets CMAKE_PREFIX_PATH itself (`set(CMAKE_PREFIX_PATH
// "/opt/libtorch")`, as public projects do) hides the prefix path given on
// the command line, which is where the user points CMake at the runtime's
// package: the migrated find_package(Fabric) also searches the command
// line's (cached) value, so the migrated tree configures unedited.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/cmake-prefix-path %t/project
// RUN: cmake -S %t/project -B %t/build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DTorch_DIR=%S/Inputs/cmake-packages -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: %fabricize --all -p %t/build -o %t/out 2> %t/err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt
// CHECK: {{^}}find_package(Torch REQUIRED)
// CHECK-NEXT: {{^}}find_package(Fabric CONFIG REQUIRED HINTS $CACHE{CMAKE_PREFIX_PATH})
// CHECK: {{^}}target_link_libraries(train "${TORCH_LIBRARIES}" Fabric::fabric)
// RUN: cmake -S %t/out -B %t/out-build -G Ninja -DTorch_DIR=%S/Inputs/cmake-packages -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/out-configure.log
// RUN: cmake --build %t/out-build > %t/out-build.log
// RUN: grep -F "Fabric_DIR:PATH=%S/Inputs/cmake-packages" %t/out-build/CMakeCache.txt
//
// A project that does not set it gets the plain line.
// RUN: sed -i '/set(CMAKE_PREFIX_PATH/d' %t/project/CMakeLists.txt
// RUN: %fabricize --all -p %t/build -o %t/plain 2> /dev/null; test $? -le 1
// RUN: FileCheck %s --input-file=%t/plain/CMakeLists.txt --check-prefix=PLAIN
// PLAIN: {{^}}find_package(Fabric CONFIG REQUIRED){{$}}
