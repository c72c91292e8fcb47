// Inputs with nothing to migrate come out byte-identical, and exit 0.
// RUN: rm -rf %t && mkdir -p %t && printf '' > %t/empty.cpp
// RUN: %fabricize --stdout %t/empty.cpp -- %flags > %t/empty.out
// RUN: test ! -s %t/empty.out
// A file without main and without training code.
// RUN: printf '#include <torch/torch.h>\r\nint add(int a, int b) { return a + b; }\r\n' > %t/crlf.cpp
// RUN: %fabricize --stdout %t/crlf.cpp -- %flags > %t/crlf.out
// RUN: cmp %t/crlf.cpp %t/crlf.out
// CRLF line endings survive an edit on another line.
// RUN: printf '#include <torch/torch.h>\r\nvoid f(fabric::Fabric& fabric, torch::Tensor l) {\r\n  l.backward();\r\n}\r\n' > %t/crlf2.cpp
// RUN: %fabricize --stdout %t/crlf2.cpp -- %flags -include fabric/fabric.h > %t/crlf2.out
// RUN: tr -cd '\r' < %t/crlf2.out | wc -c | FileCheck %s --check-prefix=CRLF
// CRLF: 5
// RUN: FileCheck %s --input-file=%t/crlf2.out --check-prefix=CRLF-FIX
// CRLF-FIX: fabric.backward(l);
