// Without clang-tidy or the plugin, the plugin's tests stop with an error
// that names what is missing; they never pass or skip quietly.
// RUN: not %lit -Dfabricize=%fabricize -Dexec_root=%t.noparams %S/messages.cpp > %t.none 2>&1
// RUN: FileCheck %s --check-prefix=NONE --input-file=%t.none
// RUN: not %lit -Dfabricize=%fabricize -Dexec_root=%t.noplugin -Dclang_tidy=%clang_tidy %S/messages.cpp > %t.noplugin.out 2>&1
// RUN: FileCheck %s --check-prefix=NOPLUGIN --input-file=%t.noplugin.out
// RUN: not %lit -Dfabricize=%fabricize -Dexec_root=%t.wrong -Dclang_tidy=%clang_tidy -Dtidy_plugin=%t.absent.so %S/messages.cpp > %t.wrong.out 2>&1
// RUN: FileCheck %s --check-prefix=WRONG --input-file=%t.wrong.out
// NONE: fatal: test/tidy needs -Dclang_tidy=<path to the clang-tidy 19 executable (Debian: clang-tidy-19)>
// NONE-NOT: PASS
// NOPLUGIN: fatal: test/tidy needs -Dtidy_plugin=<path to the plugin
// NOPLUGIN-NOT: PASS
// WRONG: fatal: test/tidy: -Dtidy_plugin={{.*}}absent.so does not exist
