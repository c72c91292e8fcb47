// The plugin loads into clang-tidy 19 and offers one check per catalogue
// rule: the same ids, in any order, as `fabricize --list-rules`.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --list-checks > %t.list
// RUN: FileCheck %s --input-file=%t.list
// RUN: %fabricize --list-rules | cut -f1 | sort > %t.rules
// RUN: grep -o 'fabric-[a-z0-9-]*' %t.list | sort > %t.checks
// RUN: diff %t.rules %t.checks
// The wrapper for editors (build/bin/clang-tidy-fabric, beside fabricize)
// is clang-tidy with the plugin loaded.
// RUN: sh $(dirname %fabricize)/clang-tidy-fabric --checks='-*,fabric-*' --list-checks | grep -o 'fabric-[a-z0-9-]*' | sort > %t.wrapped
// RUN: diff %t.rules %t.wrapped
// Without the plugin there are no fabric checks: they come from it.
// RUN: not %clang_tidy --checks='-*,fabric-*' --list-checks > %t.none 2>&1
// RUN: FileCheck %s --check-prefix=NONE --input-file=%t.none
//
// CHECK: Enabled checks:
// CHECK-DAG: {{^ +}}fabric-backward{{$}}
// CHECK-DAG: {{^ +}}fabric-insert{{$}}
// CHECK-DAG: {{^ +}}fabric-hardcoded-device{{$}}
// NONE: No checks enabled.
