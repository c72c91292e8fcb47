// --fix over a project whose header gets the runtime (trainer.h holds the
// Fabric for its member): the source that includes it gets no include of
// its own, so --fix writes what migrate writes (tool/services/FabricInclude.cpp).
// RUN: rm -rf %t && mkdir -p %t/build && cp -r %S/../tool/Inputs/project %t/project
// RUN: %python -c "import json,sys; d='%t/project/src'; print(json.dumps([{'directory': '%t/build', 'file': d+'/'+f, 'arguments': ['clang++', '-std=c++17', '-isystem', '%S/../stubs', '-c', d+'/'+f]} for f in ('main.cpp', 'trainer.cpp', 'tool.cpp')]))" > %t/build/compile_commands.json
// RUN: %fabricize --all -p %t/build --root %t/project -o %t/migrated --quiet; test $? -le 1
// RUN: %lint --fix -p %t/build --root %t/project > %t/fix.out; test $? -le 1
// RUN: FileCheck %s --input-file=%t/project/src/trainer.h --check-prefix=HEADER
// RUN: FileCheck %s --input-file=%t/project/src/trainer.cpp --check-prefix=SOURCE
// HEADER: #include <fabric/fabric.h>
// SOURCE-NOT: #include <fabric/fabric.h>
// SOURCE: fabric_.backward(model_->forward(x).sum());
// RUN: diff -u %t/migrated/src/trainer.h %t/project/src/trainer.h
// RUN: diff -u %t/migrated/src/trainer.cpp %t/project/src/trainer.cpp
// RUN: diff -u %t/migrated/src/main.cpp %t/project/src/main.cpp
