// -o that resolves into the input tree (the root itself, through a symlink,
// or a directory still to be created under a symlink into the tree) is
// refused with exit 2 and nothing is written; the input stays as it was.
// RUN: rm -rf %t && mkdir -p %t/project/src && cp %S/Inputs/train.cpp %t/project/src/train.cpp
// RUN: ln -s %t/project %t/alias
//
// RUN: %fabricize %t/project/src/train.cpp --root %t/project -o %t/project -- %flags 2> %t/root.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/root.err
// RUN: %fabricize %t/project/src/train.cpp --root %t/project -o %t/alias -- %flags 2> %t/alias.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/alias.err
// RUN: %fabricize %t/project/src/train.cpp --root %t/project -o %t/alias/new/out -- %flags 2> %t/new.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/new.err
// RUN: %fabricize %t/alias/src/train.cpp -o %t/project/src/out -- %flags 2> %t/through.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/through.err
// RUN: cmp %S/Inputs/train.cpp %t/project/src/train.cpp
// RUN: find %t/project | sort | FileCheck %s --check-prefix=TREE
//
// CHECK: error: -o {{.*}} is inside the project root
// TREE: project
// TREE-NEXT: project/src
// TREE-NEXT: project/src/train.cpp
// TREE-NOT: {{.}}
