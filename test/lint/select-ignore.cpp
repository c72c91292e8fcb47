// --select/--ignore take comma lists of ids or prefixes; a .fabricize.json
// in the file's directory or above selects and ignores the same way, and
// the command line replaces what it sets.
// RUN: rm -rf %t && mkdir -p %t/project/src && cp %s %t/project/src/train.cpp
// RUN: cd %t/project/src && %lint train.cpp -- %flags > %t.1.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.1.out --check-prefix=ALL
// ALL-COUNT-4: warning:
// RUN: cd %t/project/src && %lint --select fabric-backward,fabric-device train.cpp -- %flags > %t.2.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.2.out --check-prefix=SELECT --implicit-check-not=warning:
// SELECT: train.cpp:41:12: warning: {{.*}} [fabric-device-move]
// SELECT: train.cpp:42:3: warning: {{.*}} [fabric-backward]
// RUN: cd %t/project/src && %lint --ignore=fabric-insert,fabric-launch,fabric-backward train.cpp -- %flags > %t.3.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.3.out --check-prefix=IGNORE --implicit-check-not=warning:
// IGNORE: train.cpp:41:12: warning: {{.*}} [fabric-device-move]
// RUN: cd %t/project/src && %lint --select fabric- --ignore fabric-device-move,fabric-backward train.cpp -- %flags > %t.4.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.4.out --check-prefix=PREFIX --implicit-check-not=warning:
// PREFIX: train.cpp:39:1: warning: {{.*}} [fabric-insert]
// PREFIX: train.cpp:39:1: warning: {{.*}} [fabric-launch]
// Everything ignored: clean, exit 0.
// RUN: cd %t/project/src && %lint --ignore 'fabric-*' train.cpp -- %flags; test $? -eq 0
//
// The config file in a parent directory applies to the file.
// RUN: echo '{"select": ["fabric-backward", "fabric-device-move"], "ignore": "fabric-device-move"}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags > %t.5.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.5.out --check-prefix=CONFIG --implicit-check-not=warning:
// CONFIG: project/src/train.cpp:42:3: warning: {{.*}} [fabric-backward]
// Each list given on the command line replaces the config's: the config's
// ignore still hides the selected rule until --ignore replaces it.
// RUN: cd %t && %lint --select fabric-device-move project -- %flags; test $? -eq 0
// RUN: cd %t && %lint --select fabric-device-move --ignore= project -- %flags > %t.6.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.6.out --check-prefix=OVERRIDE --implicit-check-not=warning:
// OVERRIDE: project/src/train.cpp:41:12: warning: {{.*}} [fabric-device-move]
// A broken config file is an error, not a silent default.
// RUN: echo '{"selekt": []}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/bad.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/bad.err --check-prefix=BAD
// BAD: error: {{.*}}.fabricize.json: unknown key 'selekt' (known: select, ignore)
#include <torch/torch.h>
int main() {
  auto a = torch::randn({2});
  auto b = a.cuda();
  a.sum().backward();
}
