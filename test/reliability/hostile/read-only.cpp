// Read-only inputs and outputs (as an unprivileged user: file modes do not
// bind root): a clear error and exit 2, nothing written, no temporary file
// left, or, for -i on a read-only file in a writable directory, the edit
// (as sed -i does: the directory entry is replaced) with the mode kept.
// RUN: rm -rf %t && mkdir -p %t/src %t/locked-out && chmod 777 %t %t/src
// RUN: cp %S/Inputs/train.cpp %t/src/train.cpp && cp %S/Inputs/train.cpp %t/pristine.cpp
// RUN: chmod 444 %t/src/train.cpp
//
// A read-only output directory.
// RUN: chmod 555 %t/locked-out
// RUN: %unprivileged %fabricize %t/src/train.cpp -o %t/locked-out -- %flags 2> %t/out.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/out.err --check-prefix=OUTDIR
// RUN: ls -A %t/locked-out | count 0
// RUN: cmp %t/pristine.cpp %t/src/train.cpp
//
// An output directory to be created under a read-only one.
// RUN: %unprivileged %fabricize %t/src/train.cpp -o %t/locked-out/sub -- %flags 2> %t/sub.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/sub.err --check-prefix=SUBDIR
// RUN: ls -A %t/locked-out | count 0
//
// -i on a read-only file in a read-only directory: refused, untouched.
// RUN: chmod 555 %t/src
// RUN: %unprivileged %fabricize -i %t/src/train.cpp -- %flags 2> %t/inplace.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/inplace.err --check-prefix=INPLACE
// RUN: cmp %t/pristine.cpp %t/src/train.cpp
// RUN: ls -A %t/src | FileCheck %s --check-prefix=NOTEMP
//
// -i on a read-only file in a writable directory: edited, mode 444 kept.
// RUN: chmod 777 %t/src
// RUN: %unprivileged %fabricize -i %t/src/train.cpp -- %flags
// RUN: FileCheck %s --input-file=%t/src/train.cpp --check-prefix=MIGRATED
// RUN: stat -c %%a %t/src/train.cpp | FileCheck %s --check-prefix=MODE
// RUN: ls -A %t/src | FileCheck %s --check-prefix=NOTEMP
//
// -i on two files, the second in a read-only directory: exit 2 and neither
// file changes (every file is written to a temporary first, then renamed).
// RUN: mkdir -p %t/two/a %t/two/b && chmod 777 %t/two %t/two/a
// RUN: cp %S/Inputs/train.cpp %t/two/a/one.cpp && cp %S/Inputs/train.cpp %t/two/b/two.cpp && chmod 555 %t/two/b
// RUN: %unprivileged %fabricize -i %t/two/a/one.cpp %t/two/b/two.cpp -- %flags 2> %t/two.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/two.err --check-prefix=TWO
// RUN: cmp %t/pristine.cpp %t/two/a/one.cpp
// RUN: cmp %t/pristine.cpp %t/two/b/two.cpp
// RUN: ls -A %t/two/a %t/two/b | FileCheck %s --check-prefix=NOTEMP
// The same with --backup: no .orig is left either.
// RUN: %unprivileged %fabricize -i --backup %t/two/a/one.cpp %t/two/b/two.cpp -- %flags 2> /dev/null; test $? -eq 2
// RUN: ls -A %t/two/a | FileCheck %s --check-prefix=NOORIG
// RUN: cmp %t/pristine.cpp %t/two/a/one.cpp
//
// -o, --stdout and --diff never modify the input (checked on a writable copy).
// RUN: mkdir %t/w && cp %S/Inputs/train.cpp %t/w/writable.cpp && chmod 666 %t/w/writable.cpp
// RUN: %fabricize %t/w/writable.cpp -o %t/out2 -- %flags
// RUN: %fabricize --stdout %t/w/writable.cpp -- %flags > /dev/null
// RUN: %fabricize --diff %t/w/writable.cpp -- %flags > /dev/null
// RUN: cmp %S/Inputs/train.cpp %t/w/writable.cpp
// RUN: FileCheck %s --input-file=%t/out2/writable.cpp --check-prefix=MIGRATED
//
// OUTDIR: fabricize: error: cannot write next to {{.*}}locked-out/train.cpp: Permission denied
// SUBDIR: fabricize: error: cannot create directory {{.*}}locked-out/sub: Permission denied
// INPLACE: fabricize: error: cannot write next to {{.*}}src/train.cpp: Permission denied
// NOTEMP-NOT: fabricize-
// TWO: fabricize: error: cannot write next to {{.*}}two/b/two.cpp: Permission denied
// NOORIG-NOT: .orig
// MIGRATED: fabric.backward(loss);
// MODE: 444
