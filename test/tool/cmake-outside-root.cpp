// A project, a git repository of its own, whose build compiles a source
// outside that repository (a sibling checkout added with add_subdirectory):
// that source is reported (fabric-project, file:line:col, what to do) and
// never written, the exit code is 1, and the rest is migrated. Built with
// the Makefile generator, whose record of the configure step's inputs
// (CMakeFiles/Makefile.cmake) the mirror reads.
// RUN: rm -rf %t && mkdir -p %t/ws && cp -r %S/Inputs/cmake-outside/project %S/Inputs/cmake-outside/common %t/ws/
// RUN: git init -q %t/ws/project
// RUN: cmake -S %t/ws/project -B %t/build -G "Unix Makefiles" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: %fabricize --all -p %t/build -o %t/ws/out --report %t/report.json 2> %t/err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/err
// CHECK: {{.*}}/common/helper.cpp:1:1: warning: compile_commands.json lists this source, but it is outside the project root {{.*}}/project (the CMake source directory named by {{.*}}/build/CMakeCache.txt): it was not migrated and nothing was written for it; give --root <a folder holding it and the project> to migrate it with the project, or migrate it on its own [fabric-project]
// CHECK: fabricize: 1 findings need a person
// RUN: FileCheck %s --input-file=%t/report.json --check-prefix=REPORT
// REPORT: "rule": "fabric-project"
//
// Nothing of the sibling is written, in the mirror or in place.
// RUN: cd %t/ws/out && find . -type f -not -path './.git/*' | sort | FileCheck %s --check-prefix=TREE
// TREE: ./CMakeLists.txt
// TREE-NEXT: ./train.cpp
// TREE-NOT: {{.}}
// RUN: FileCheck %s --input-file=%t/ws/out/train.cpp --check-prefix=MIGRATED
// MIGRATED: fabric.backward(loss);
// RUN: %fabricize --all -p %t/build -i --quiet 2> %t/inplace.err; test $? -eq 1
// RUN: diff -r %S/Inputs/cmake-outside/common %t/ws/common
// RUN: diff %t/ws/out/train.cpp %t/ws/project/train.cpp
//
// The mirror configures and builds: the sibling is still where the
// CMakeLists.txt says (ws/out/../common).
// RUN: cmake -S %t/ws/out -B %t/ws/out-build -G "Unix Makefiles" -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/ws/out-configure.log
// RUN: cmake --build %t/ws/out-build > %t/ws/out-build.log
//
// With a root that holds both, both are migrated and mirrored.
// RUN: rm -rf %t/ws/common && cp -r %S/Inputs/cmake-outside/common %t/ws/ && rm -rf %t/ws/project && cp -r %S/Inputs/cmake-outside/project %t/ws/
// RUN: %fabricize --all -p %t/build --root %t/ws -o %t/both 2> %t/both.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/both.err --check-prefix=BOTH
// RUN: not grep fabric-project %t/both.err
// BOTH-DAG: fabricize: common/helper.cpp: {{[0-9]+}} edits
// BOTH-DAG: fabricize: project/train.cpp: {{[0-9]+}} edits
// Migrated together, the helper's code uses the Fabric, so it is passed in
// (fabric-thread-fabric); alone, the outside source kept its signature.
// RUN: FileCheck %s --input-file=%t/both/project/train.cpp --check-prefix=BOTH-TRAIN
// BOTH-TRAIN: torch::Tensor loss_of(fabric::Fabric& fabric, torch::Tensor x);
// BOTH-TRAIN: torch::Tensor loss = loss_of(fabric, x);
// RUN: grep -F 'torch::Tensor loss_of(torch::Tensor x);' %t/ws/out/train.cpp
//
// Not a repository of its own (the sibling is then in the same work tree,
// here the checkout's): the root is the smallest folder holding what the
// build reads, both are migrated, and the mirror holds both.
// RUN: rm -rf %t/ws/project/.git
// RUN: %fabricize --all -p %t/build -o %t/whole 2> %t/whole.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/whole.err --check-prefix=WHOLE
// RUN: not grep -F "[fabric-project]" %t/whole.err
// WHOLE: fabricize: project root {{.*}}/ws (the smallest folder holding the CMake source directory {{.*}}/ws/project and what its build reads outside it: common/CMakeLists.txt, common/helper.cpp
// RUN: cmake -S %t/whole/project -B %t/whole-build -G "Unix Makefiles" -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/whole-configure.log
// RUN: cmake --build %t/whole-build > %t/whole-build.log
