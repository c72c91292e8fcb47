// Bytes that are not UTF-8, a UTF-8 BOM, CRLF line endings throughout and a
// huge file: a correct migration that keeps every byte it does not edit.
// RUN: rm -rf %t && mkdir -p %t
//
// Latin-1 bytes in a comment and a string literal survive the edit.
// RUN: %python -c "import sys; t = open(sys.argv[1], 'rb').read(); t = t.replace(b'int main() {', b'// caf\xe9 \xff\xfe na\xefve\nconst char* name = \"\xe9t\xe9\";\nint main() {'); open(sys.argv[2], 'wb').write(t)" %S/Inputs/train.cpp %t/latin1.cpp
// RUN: %migrate %t/latin1.cpp -- %flags > %t/latin1.out
// RUN: FileCheck %s --input-file=%t/latin1.out --check-prefix=MIGRATED
// RUN: %python -c "import sys; t = open(sys.argv[1], 'rb').read(); print('comment', t.count(b'// caf\xe9 \xff\xfe na\xefve\n'), 'literal', t.count(b'\"\xe9t\xe9\";'))" %t/latin1.out | FileCheck %s --check-prefix=BYTES
//
// A BOM stays the file's first bytes.
// RUN: printf '\xef\xbb\xbf' > %t/bom.cpp && cat %S/Inputs/train.cpp >> %t/bom.cpp
// RUN: %migrate %t/bom.cpp -- %flags > %t/bom.out
// RUN: FileCheck %s --input-file=%t/bom.out --check-prefix=MIGRATED
// RUN: head -c 3 %t/bom.out | od -An -tx1 | FileCheck %s --check-prefix=BOM
//
// CRLF everywhere: the inserted lines use CRLF too (no bare LF appears).
// RUN: sed 's/$/\r/' %S/Inputs/train.cpp > %t/crlf.cpp
// RUN: %migrate %t/crlf.cpp -- %flags > %t/crlf.out
// RUN: FileCheck %s --input-file=%t/crlf.out --check-prefix=MIGRATED
// RUN: %python -c "import sys; t = open(sys.argv[1], 'rb').read(); n = t.count(b'\n'); r = t.count(b'\r\n'); print('lines', n, 'crlf', r, 'bare', n - r)" %t/crlf.out | FileCheck %s --check-prefix=CRLF
// RUN: cp %t/crlf.out %t/crlf-again.cpp && %migrate %t/crlf-again.cpp -- %flags | cmp - %t/crlf.out
//
// A huge file (~4 MB, 100000 functions before main) migrates, with the same
// edits as the small one, and only main's lines change.
// RUN: %python -c "import sys; body = ''.join('int helper%%d(int v) { return v * %%d + 1; }\n' %% (i, i) for i in range(100000)); t = open(sys.argv[1]).read().replace('int main() {', body + 'int main() {'); open(sys.argv[2], 'w').write(t)" %S/Inputs/train.cpp %t/huge.cpp
// RUN: %migrate %t/huge.cpp -- %flags > %t/huge.out
// RUN: FileCheck %s --input-file=%t/huge.out --check-prefix=MIGRATED
// RUN: grep -c '^int helper' %t/huge.out | FileCheck %s --check-prefix=HELPERS
// RUN: %migrate %S/Inputs/train.cpp -- %flags > %t/small.out
// RUN: grep -v '^int helper' %t/huge.out | diff %t/small.out -
//
// MIGRATED: #include <fabric/fabric.h>
// MIGRATED: fabric.launch();
// MIGRATED: fabric.setup(model, optimizer);
// MIGRATED: fabric.backward(loss);
// BYTES: comment 1 literal 1
// BOM: ef bb bf
// CRLF: bare 0
// HELPERS: {{^100000$}}
