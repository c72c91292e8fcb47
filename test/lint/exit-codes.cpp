// Exit codes: 0 clean, 1 findings, 2 whenever something was not analysed
// (missing file, bad option, a file that does not compile), even when other
// files had findings.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %lint %S/Inputs/migrated.cpp -- %flags > %t/clean.out; test $? -eq 0
// RUN: test ! -s %t/clean.out
// RUN: %lint %s -- %flags > /dev/null; test $? -eq 1
// RUN: %lint %t/missing.cpp -- %flags 2> %t/missing.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/missing.err --check-prefix=MISSING
// MISSING: fabricize lint: error: {{.*}}missing.cpp: no such file or directory
// RUN: %lint --no-such-option %s 2> %t/option.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/option.err --check-prefix=OPTION
// OPTION: error: unknown option '--no-such-option'
// RUN: %lint %s --format 2> %t/value.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/value.err --check-prefix=VALUE
// VALUE: error: option '--format' needs a value
// RUN: %lint --format xml %s 2> %t/format.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/format.err --check-prefix=FORMAT
// FORMAT: error: unknown --format 'xml' (text, json, sarif, github)
// RUN: %lint %S/Inputs/parse-error.cpp %s -- %flags > %t/parse.out 2> %t/parse.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/parse.err --check-prefix=PARSE
// RUN: FileCheck %s --input-file=%t/parse.out --check-prefix=OTHER
// PARSE: parse-error.cpp:{{[0-9]+}}:{{[0-9]+}}: error:
// PARSE: fabricize lint: error: {{.*}}parse-error.cpp: does not compile (see the errors above); it was not analysed
// OTHER: exit-codes.cpp:[[@LINE+5]]:3: warning: {{.*}} [fabric-backward]
// RUN: %lint --format sarif %S/Inputs/parse-error.cpp -- %flags > %t/parse.sarif; test $? -eq 2
// RUN: %python -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]['invocations'][0]; assert r['executionSuccessful'] is False and r['toolExecutionNotifications'], r" %t/parse.sarif
#include <torch/torch.h>
int main() {
  torch::randn({2}).sum().backward();
}
