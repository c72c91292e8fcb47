// Every rule test's input, fixed by clang-tidy with all fabric checks,
// equals `fabricize --stdout` of it; and the multi-file project of the
// fabric-thread-fabric test, header included, equals `fabricize -o`.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/compare_fixes.py --clang-tidy %clang_tidy --plugin %tidy_plugin \
// RUN:   --fabricize %fabricize --work %t --flags="%flags" %S/../rules/*.cpp | FileCheck %s
// RUN: cp -r %S/../rules/Inputs/thread-fabric %t/project && cp -r %t/project %t/tidy
// RUN: %fabricize %t/project/trainer.cpp %t/project/main.cpp -o %t/migrated -- %flags
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --header-filter='.*' --fix \
// RUN:   %t/tidy/trainer.cpp %t/tidy/main.cpp -- %flags > %t/tidy.out 2>&1
// RUN: diff -u %t/migrated/trainer.h %t/tidy/trainer.h
// RUN: diff -u %t/migrated/trainer.cpp %t/tidy/trainer.cpp
// RUN: diff -u %t/migrated/main.cpp %t/tidy/main.cpp
// RUN: not diff -q %t/project/trainer.h %t/tidy/trainer.h
//
// CHECK: fabric-backward.cpp: same
// CHECK: fabric-thread-fabric.cpp: same
// CHECK: {{[1-9][0-9]*}} inputs changed by the migration, all fixed identically by clang-tidy
