// The common CMake layout (CMakeLists.txt, src/*.cpp, include/*.h, a CMake
// module, a configure_file template) migrated with exactly the README's
// command: -p gives the project root (the CMake source directory the build's
// CMakeCache.txt names), and -o mirrors everything the build reads, so the
// mirrored tree configures and builds on its own.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/cmake-layout %t/project
// RUN: cmake -S %t/project -B %t/build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: cd %t && %fabricize --all -p build -o out 2> %t/err
// RUN: FileCheck %s --input-file=%t/err --check-prefix=ROOT
// ROOT: fabricize: project root {{.*}}/project (the CMake source directory named by {{.*}}/build/CMakeCache.txt)
// ROOT-DAG: fabricize: CMakeLists.txt: 2 edits (fabric-cmake 2)
// ROOT-DAG: fabricize: src/trainer.cpp: {{[0-9]+}} edits
//
// Exactly what the build reads from the project: sources, the headers they
// include, every CMake file the configure step read, the configure_file
// template; nothing of the build tree (its generated config.h).
// RUN: cd %t/out && find . -type f | sort > %t/tree.txt
// RUN: FileCheck %s --input-file=%t/tree.txt --check-prefix=TREE
// TREE: ./CMakeLists.txt
// TREE-NEXT: ./cmake/Standard.cmake
// TREE-NEXT: ./config.h.in
// TREE-NEXT: ./include/trainer.h
// TREE-NEXT: ./include/util.h
// TREE-NEXT: ./src/main.cpp
// TREE-NEXT: ./src/trainer.cpp
// TREE-NOT: {{.}}
// RUN: diff %t/project/include/util.h %t/out/include/util.h
// RUN: diff %t/project/cmake/Standard.cmake %t/out/cmake/Standard.cmake
// RUN: diff %t/project/config.h.in %t/out/config.h.in
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt --check-prefix=CMAKE
// CMAKE: {{^}}find_package(Torch REQUIRED)
// CMAKE-NEXT: {{^}}find_package(Fabric CONFIG REQUIRED)
// CMAKE: target_link_libraries(train PRIVATE ${TORCH_LIBRARIES} Fabric::fabric)
// RUN: FileCheck %s --input-file=%t/out/src/trainer.cpp --check-prefix=SOURCE
// SOURCE: fabric_.backward(model_->forward(x).sum());
// RUN: FileCheck %s --input-file=%t/out/include/trainer.h --check-prefix=HEADER
// HEADER: #include <fabric/fabric.h>
//
// The mirrored tree configures and builds against find_package(Fabric).
// RUN: cmake -S %t/out -B %t/out-build -G Ninja -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/out-configure.log
// RUN: cmake --build %t/out-build > %t/out-build.log
//
// The lint takes the same root from -p: the project's headers in include/
// are reported too, not only src/.
// RUN: cd %t && %lint -p build > %t/lint.txt; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/lint.txt --check-prefix=LINT
// LINT: project/include/trainer.h:{{[0-9]+}}:{{[0-9]+}}: warning: {{.*}}[fabric-thread-fabric]
// LINT: project/src/trainer.cpp:{{[0-9]+}}:{{[0-9]+}}: warning: {{.*}}[fabric-backward]
//
// The inputs are as they were.
// RUN: diff -r %S/Inputs/cmake-layout %t/project
//
// --root still overrides what -p says.
// RUN: %fabricize --all -p %t/build --root %t/project/src -o %t/out-src --quiet
// RUN: cd %t/out-src && find . -type f | sort | FileCheck %s --check-prefix=OVERRIDE
// OVERRIDE: ./main.cpp
// OVERRIDE-NEXT: ./trainer.cpp
// OVERRIDE-NOT: {{.}}
//
// An in-source build (the build directory is the project): CMake's own files
// are still not the project's; the header the build wrote beside the sources
// is read by them and comes along.
// RUN: cp -r %S/Inputs/cmake-layout %t/insource
// RUN: cmake -S %t/insource -B %t/insource -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/insource-configure.log
// RUN: %fabricize --all -p %t/insource -o %t/out-insource --quiet
// RUN: cd %t/out-insource && find . -type f | sort | FileCheck %s --check-prefix=INSOURCE
// INSOURCE: ./CMakeLists.txt
// INSOURCE-NEXT: ./cmake/Standard.cmake
// INSOURCE-NEXT: ./config.h
// INSOURCE-NEXT: ./config.h.in
// INSOURCE-NEXT: ./include/trainer.h
// INSOURCE-NEXT: ./include/util.h
// INSOURCE-NEXT: ./src/main.cpp
// INSOURCE-NEXT: ./src/trainer.cpp
// INSOURCE-NOT: {{.}}
// RUN: diff %t/out/CMakeLists.txt %t/out-insource/CMakeLists.txt
