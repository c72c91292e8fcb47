// Inputs that are not C++ (binary, half a file, prose, a missing
// include): exit 2, a message naming the file, nothing written under -o, the
// input byte-identical; --stdout prints nothing.
// RUN: rm -rf %t && mkdir -p %t/in
// RUN: %python -c "import random; r = random.Random(7); open('%t/in/binary.cpp', 'wb').write(bytes(r.randrange(256) for _ in range(65536)))"
// RUN: %python -c "open('%t/in/nul.cpp', 'wb').write(b'int main() {\0\0\0 return 0; }\n')"
// RUN: head -c 400 %S/Inputs/train.cpp > %t/in/truncated.cpp
// RUN: printf '#include <torch/torch.h>\n#include "no_such_header.h"\nint main() { return 0; }\n' > %t/in/missing-include.cpp
// RUN: printf 'this is not C++ at all: @@@ ```\n' > %t/in/prose.cpp
// RUN: cp -r %t/in %t/pristine
//
// NUL bytes are whitespace to clang: the file has nothing to migrate and
// comes out byte for byte, exit 0.
// RUN: %fabricize %t/in/nul.cpp -o %t/nul-out -- %flags 2> %t/nul.err
// RUN: cmp %t/in/nul.cpp %t/nul-out/nul.cpp
// RUN: FileCheck %s --input-file=%t/nul.err --check-prefix=NUL
// RUN: mv %t/in/nul.cpp %t/nul.cpp && rm %t/pristine/nul.cpp
//
// RUN: %fabricize %t/in/binary.cpp -o %t/out -- %flags > %t/binary.stdout 2> %t/binary.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/binary.err --check-prefix=NOTHING -DFILE=binary.cpp
// RUN: %fabricize %t/in/truncated.cpp -o %t/out -- %flags 2> %t/truncated.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/truncated.err --check-prefix=NOTHING -DFILE=truncated.cpp
// RUN: %fabricize %t/in/missing-include.cpp -o %t/out -- %flags 2> %t/missing.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/missing.err --check-prefixes=MISSING,NOTHING -DFILE=missing-include.cpp
// RUN: %fabricize %t/in/prose.cpp -o %t/out -- %flags 2> %t/prose.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/prose.err --check-prefix=NOTHING -DFILE=prose.cpp
// RUN: test ! -e %t/out
// RUN: diff -r %t/pristine %t/in
// RUN: ls -a %t/in | FileCheck %s --check-prefix=NOTEMP
//
// --stdout, --diff and -i on a broken file: exit 2, nothing on stdout, file untouched.
// RUN: %fabricize --stdout %t/in/truncated.cpp -- %flags > %t/stdout.out 2>/dev/null; test $? -eq 2
// RUN: test ! -s %t/stdout.out
// RUN: %fabricize --diff %t/in/truncated.cpp -- %flags > %t/diff.out 2>/dev/null; test $? -eq 2
// RUN: test ! -s %t/diff.out
// RUN: %fabricize -i %t/in/truncated.cpp -- %flags 2>/dev/null; test $? -eq 2
// RUN: cmp %t/pristine/truncated.cpp %t/in/truncated.cpp
//
// A good file next to a broken one: the whole run fails, nothing is written.
// RUN: cp %S/Inputs/train.cpp %t/in/good.cpp && cp %t/in/good.cpp %t/pristine/good.cpp
// RUN: %fabricize %t/in/good.cpp %t/in/truncated.cpp -o %t/out -- %flags 2> %t/two.err; test $? -eq 2
// RUN: test ! -e %t/out
// RUN: %fabricize -i %t/in/good.cpp %t/in/truncated.cpp -- %flags 2>/dev/null; test $? -eq 2
// RUN: diff -r %t/pristine %t/in
//
// NUL: nul.cpp: 0 edits
// MISSING: no_such_header.h' file not found
// NOTHING: fabricize: error: {{.*}}[[FILE]]: does not compile (see the errors above); nothing was written
// NOTEMP-NOT: fabricize-
