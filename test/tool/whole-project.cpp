// A whole project through its compile_commands.json: --all migrates every
// source it lists (in parallel with -j), the headers they include once, and
// the CMakeLists.txt; -o mirrors what the build needs; -i --backup keeps the
// originals. Migrating the result again changes nothing.
// RUN: rm -rf %t && mkdir -p %t/build && cp -r %S/Inputs/project %t/project
// RUN: %python -c "import json,sys; d='%t/project/src'; print(json.dumps([{'directory': '%t/build', 'file': d+'/'+f, 'arguments': ['clang++', '-std=c++17', '-isystem', '%S/../stubs', '-c', d+'/'+f]} for f in ('main.cpp', 'trainer.cpp', 'tool.cpp')]))" > %t/build/compile_commands.json
//
// --all needs the database, and takes no sources of its own.
// RUN: not %fabricize --all -o %t/out 2>&1 | FileCheck %s --check-prefix=NEEDS-P
// RUN: not %fabricize --all -p %t/build %t/project/src/main.cpp -o %t/out 2>&1 | FileCheck %s --check-prefix=NO-SOURCES
// NEEDS-P: error: --all needs -p <build dir>
// NO-SOURCES: error: --all migrates the database's sources: give no source files
//
// RUN: %fabricize --all -p %t/build --root %t/project -o %t/out -j 2 --report %t/report.json 2> %t/err
// RUN: FileCheck %s --input-file=%t/err --check-prefix=PROGRESS
// PROGRESS-DAG: fabricize: [1/3]
// PROGRESS-DAG: fabricize: [3/3]
// PROGRESS-DAG: fabricize: CMakeLists.txt: 2 edits (fabric-cmake 2)
// PROGRESS-DAG: fabricize: src/trainer.h: 3 edits
//
// The build file finds the runtime and links it where LibTorch is linked.
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt --check-prefix=CMAKE
// CMAKE: {{^}}  find_package(Torch REQUIRED)
// CMAKE-NEXT: {{^}}  find_package(Fabric CONFIG REQUIRED)
// CMAKE: {{^}}  ${TORCH_LIBRARIES} Fabric::fabric # the frontend
// CMAKE: {{^}}add_executable(tool src/tool.cpp)
//
// The header gets the include; trainer.cpp reaches it through trainer.h.
// RUN: FileCheck %s --input-file=%t/out/src/trainer.h --check-prefix=HEADER
// RUN: FileCheck %s --input-file=%t/out/src/trainer.cpp --check-prefix=SOURCE
// HEADER: #include <fabric/fabric.h>
// HEADER: fabric::Fabric& fabric_;
// SOURCE-NOT: #include <fabric/fabric.h>
// SOURCE: fabric_.backward(model_->forward(x).sum());
//
// Everything the build reads is mirrored, edited or not.
// RUN: diff %t/project/src/util.h %t/out/src/util.h
// RUN: diff %t/project/src/tool.cpp %t/out/src/tool.cpp
// RUN: FileCheck %s --input-file=%t/report.json --check-prefix=REPORT
// REPORT: "rule": "fabric-cmake"
//
// -j does not change the result.
// RUN: %fabricize --all -p %t/build --root %t/project -o %t/serial -j 1 --quiet
// RUN: diff -r %t/out %t/serial
//
// -i --backup: originals beside the edited files, and only theirs.
// RUN: cp -r %t/project %t/inplace
// RUN: %python -c "import json; p='%t/build/compile_commands.json'; t=open(p).read().replace('/project/', '/inplace/'); open('%t/build/inplace.json','w').write(t)"
// RUN: mkdir -p %t/build2 && mv %t/build/inplace.json %t/build2/compile_commands.json
// RUN: %fabricize --all -p %t/build2 --root %t/inplace -i --backup --quiet
// RUN: diff -r -x '*.orig' %t/out %t/inplace
// RUN: diff %t/project/src/trainer.h %t/inplace/src/trainer.h.orig
// RUN: diff %t/project/CMakeLists.txt %t/inplace/CMakeLists.txt.orig
// RUN: test ! -e %t/inplace/src/util.h.orig
// A backup that exists already is never overwritten: refused before any
// file is touched.
// RUN: cp -r %t/project %t/taken && echo '// an older backup' > %t/taken/src/trainer.cpp.orig
// RUN: sed 's|/inplace/|/taken/|g' %t/build2/compile_commands.json > %t/taken.json && mkdir -p %t/build3 && mv %t/taken.json %t/build3/compile_commands.json
// RUN: not %fabricize --all -p %t/build3 --root %t/taken -i --backup --quiet 2>&1 | FileCheck %s --check-prefix=BACKUP
// BACKUP: error: {{.*}}trainer.cpp.orig exists
// RUN: diff -r -x '*.orig' %t/project %t/taken
// RUN: ls %t/taken/src | FileCheck %s --check-prefix=ONE-BACKUP
// ONE-BACKUP-NOT: .orig
// ONE-BACKUP: trainer.cpp.orig
// ONE-BACKUP-NOT: .orig
//
// Migrating the migrated tree again changes nothing.
// RUN: %fabricize --all -p %t/build2 --root %t/inplace -i --quiet 2>&1 | count 0
// RUN: diff -r -x '*.orig' %t/out %t/inplace
