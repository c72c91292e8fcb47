// A project folder inside a repository, migrated from that folder the way
// the README says (`cd projects/face; fabricize --all -p build -o out`):
// its CMakeLists.txt pulls the repository's shared utils/ with
// add_subdirectory(../../utils build) and includes ../../cmake/warnings.cmake,
// and links a list in a variable. The root is the smallest folder holding
// the project, the sources its build compiles and the CMake files its
// configure step read (not the files the command line injected, not the
// packages it found), bounded by the git work tree: the repository. The
// mirror then configures and builds, and -i edits the shared files too. A
// sibling project the build does not read is neither mirrored nor edited.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/cmake-repository %t/repo && git init -q %t/repo
// RUN: cd %t/repo/projects/face && cmake -B build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages -DCMAKE_PROJECT_INCLUDE=%S/Inputs/project-include.cmake > %t/configure.log
// RUN: cd %t/repo/projects/face && %fabricize --all -p build -o %t/out 2> %t/err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/err
// CHECK: fabricize: project root {{.*}}/repo (the smallest folder holding the CMake source directory {{.*}}/repo/projects/face and what its build reads outside it: cmake/warnings.cmake, utils/CMakeLists.txt, utils/batches.cpp; all inside the git work tree {{.*}}/repo)
// CHECK-DAG: fabricize: projects/face/CMakeLists.txt: 2 edits (fabric-cmake 2)
// CHECK-DAG: fabricize: utils/CMakeLists.txt: 1 edits (fabric-cmake 1)
// CHECK-DAG: fabricize: projects/face/train.cpp: {{[0-9]+}} edits
// RUN: not grep -F "[fabric-project]" %t/err
// RUN: not grep -F "[fabric-cmake]" %t/err
// RUN: cd %t/out && find . -type f | sort | FileCheck %s --check-prefix=TREE
// -o copies the whole repository (the other project too, as it is), but
// not its .git or the project's build folder.
// TREE: ./cmake/warnings.cmake
// TREE-NEXT: ./projects/denoise/CMakeLists.txt
// TREE-NEXT: ./projects/denoise/main.cpp
// TREE-NEXT: ./projects/face/CMakeLists.txt
// TREE-NEXT: ./projects/face/train.cpp
// TREE-NEXT: ./utils/CMakeLists.txt
// TREE-NEXT: ./utils/batches.cpp
// TREE-NEXT: ./utils/batches.h
// TREE-NOT: {{.}}
// RUN: FileCheck %s --input-file=%t/out/projects/face/CMakeLists.txt --check-prefix=PROJECT
// PROJECT: {{^}}find_package(Torch REQUIRED)
// PROJECT-NEXT: {{^}}find_package(Fabric CONFIG REQUIRED)
// PROJECT: {{^}}target_link_libraries(${PROJECT_NAME} ${LIBRARIES} Fabric::fabric)
// RUN: FileCheck %s --input-file=%t/out/utils/CMakeLists.txt --check-prefix=UTILS
// UTILS: {{^}}target_link_libraries(research_utils PUBLIC ${TORCH_LIBRARIES} Fabric::fabric)
//
// The mirror configures and builds from its project folder; migrating it
// again changes nothing.
// RUN: cd %t/out/projects/face && cmake -B build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/out-configure.log && cmake --build build > %t/out-build.log
// RUN: cd %t/out/projects/face && %fabricize --all -p build --diff --quiet > %t/again.diff 2> /dev/null; test $? -le 1
// RUN: count 0 < %t/again.diff
//
// In place: the shared files are edited too, the sibling project is not.
// RUN: cp -r %t/repo/projects/denoise %t/denoise-before
// RUN: cd %t/repo/projects/face && %fabricize --all -p build -i --quiet 2> /dev/null; test $? -le 1
// RUN: diff %t/out/utils/CMakeLists.txt %t/repo/utils/CMakeLists.txt
// RUN: diff %t/out/projects/face/train.cpp %t/repo/projects/face/train.cpp
// RUN: diff -r %t/denoise-before %t/repo/projects/denoise
//
// Without a git work tree of its own the configure step's inputs alone give
// the same root (here the checkout's work tree holds the test folder).
// RUN: rm -rf %t/plain && mkdir -p %t/plain && cp -r %S/Inputs/cmake-repository %t/plain/repo
// RUN: cd %t/plain/repo/projects/face && cmake -B build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: cd %t/plain/repo/projects/face && %fabricize --all -p build -o %t/plain/out 2> %t/plain.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/plain.err --check-prefix=PLAIN
// PLAIN: fabricize: project root {{.*}}/plain/repo (the smallest folder holding the CMake source directory {{.*}}/plain/repo/projects/face and what its build reads outside it: cmake/warnings.cmake, utils/CMakeLists.txt, utils/batches.cpp{{(; all inside the git work tree .*)?}})
