// A CMake project of nested add_subdirectory folders: LibTorch found once at
// the top, a library that links it (PUBLIC) in one subdirectory, an
// executable that links the library in another. The build-file migration
// works on the project as a whole: find_package(Fabric) where Torch is
// found, Fabric::fabric wherever LibTorch is linked (the executable gets it
// through the library), no note about the subdirectories that find nothing.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/cmake-nested %t/project
// RUN: cmake -S %t/project -B %t/build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: %fabricize --all -p %t/build -o %t/out 2> %t/err
// RUN: FileCheck %s --input-file=%t/err
// RUN: not grep -i warning %t/err
// CHECK-DAG: fabricize: CMakeLists.txt: 1 edits (fabric-cmake 1)
// CHECK-DAG: fabricize: model/CMakeLists.txt: 1 edits (fabric-cmake 1)
// CHECK-DAG: fabricize: apps/CMakeLists.txt: 0 edits
// CHECK-DAG: fabricize: model/src/trainer.cpp: {{[0-9]+}} edits
// CHECK-DAG: fabricize: apps/train.cpp: {{[0-9]+}} edits
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt --check-prefix=TOP
// TOP: {{^}}find_package(Torch REQUIRED)
// TOP-NEXT: {{^}}find_package(Fabric CONFIG REQUIRED)
// TOP-NEXT: {{^}}add_subdirectory(model)
// RUN: FileCheck %s --input-file=%t/out/model/CMakeLists.txt --check-prefix=LIBRARY
// LIBRARY: target_link_libraries(model PUBLIC ${TORCH_LIBRARIES} Fabric::fabric)
// RUN: diff %t/project/apps/CMakeLists.txt %t/out/apps/CMakeLists.txt
// RUN: FileCheck %s --input-file=%t/out/model/src/trainer.cpp --check-prefix=TRAINER
// TRAINER: fabric_.backward(model_->forward(x).sum());
// RUN: FileCheck %s --input-file=%t/out/apps/train.cpp --check-prefix=MAIN
// MAIN: fabric.launch();
// RUN: cd %t/out && find . -type f | sort | FileCheck %s --check-prefix=TREE
// TREE: ./CMakeLists.txt
// TREE-NEXT: ./apps/CMakeLists.txt
// TREE-NEXT: ./apps/train.cpp
// TREE-NEXT: ./model/CMakeLists.txt
// TREE-NEXT: ./model/include/model/net.h
// TREE-NEXT: ./model/include/model/trainer.h
// TREE-NEXT: ./model/src/net.cpp
// TREE-NEXT: ./model/src/trainer.cpp
// TREE-NOT: {{.}}
//
// The mirrored tree configures and builds (the executable finds
// <fabric/fabric.h> through the library).
// RUN: cmake -S %t/out -B %t/out-build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/out-configure.log
// RUN: cmake --build %t/out-build > %t/out-build.log
//
// Migrating the migrated project, through its own build, changes nothing:
// not the sources, not the CMake files.
// RUN: %fabricize --all -p %t/out-build --diff --quiet > %t/again.diff
// RUN: count 0 < %t/again.diff
//
// In place: the same edits in the project's own files.
// RUN: %fabricize --all -p %t/build -i --quiet
// RUN: diff -r %t/out %t/project
