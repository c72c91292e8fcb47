// --select/--ignore take comma lists of ids or prefixes; a .fabricize.json
// in the file's directory or above selects and ignores the same way, and
// the command line replaces what it sets.
// RUN: rm -rf %t && mkdir -p %t/project/src && cp %s %t/project/src/train.cpp
// RUN: cd %t/project/src && %lint train.cpp -- %flags > %t.1.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.1.out --check-prefix=ALL
// ALL-COUNT-4: warning:
// RUN: cd %t/project/src && %lint --select fabric-backward,fabric-device train.cpp -- %flags > %t.2.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.2.out --check-prefix=SELECT --implicit-check-not=warning:
// SELECT: train.cpp:64:12: warning: {{.*}} [fabric-device-move]
// SELECT: train.cpp:65:3: warning: {{.*}} [fabric-backward]
// RUN: cd %t/project/src && %lint --ignore=fabric-insert,fabric-launch,fabric-backward train.cpp -- %flags > %t.3.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.3.out --check-prefix=IGNORE --implicit-check-not=warning:
// IGNORE: train.cpp:64:12: warning: {{.*}} [fabric-device-move]
// RUN: cd %t/project/src && %lint --select fabric- --ignore fabric-device-move,fabric-backward train.cpp -- %flags > %t.4.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.4.out --check-prefix=PREFIX --implicit-check-not=warning:
// PREFIX: train.cpp:62:1: warning: {{.*}} [fabric-insert]
// PREFIX: train.cpp:62:1: warning: {{.*}} [fabric-launch]
// Everything ignored: clean, exit 0.
// RUN: cd %t/project/src && %lint --ignore 'fabric-*' train.cpp -- %flags; test $? -eq 0
//
// The config file in a parent directory applies to the file.
// RUN: echo '{"select": ["fabric-backward", "fabric-device-move"], "ignore": "fabric-device-move"}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags > %t.5.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.5.out --check-prefix=CONFIG --implicit-check-not=warning:
// CONFIG: project/src/train.cpp:65:3: warning: {{.*}} [fabric-backward]
// Each list given on the command line replaces the config's: the config's
// ignore still hides the selected rule until --ignore replaces it.
// RUN: cd %t && %lint --select fabric-device-move project -- %flags; test $? -eq 0
// RUN: cd %t && %lint --select fabric-device-move --ignore= project -- %flags > %t.6.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.6.out --check-prefix=OVERRIDE --implicit-check-not=warning:
// OVERRIDE: project/src/train.cpp:64:12: warning: {{.*}} [fabric-device-move]
// A broken config file is an error, not a silent default.
// RUN: echo '{"selekt": []}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/bad.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/bad.err --check-prefix=BAD
// BAD: error: {{.*}}.fabricize.json: unknown key 'selekt' (known: select, ignore)
// A rule id with a typo would select nothing and pass CI: an error naming
// the nearest id, on the command line and in the config file.
// RUN: cd %t && not %lint --select fabric-backwrd project -- %flags 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: error: --select: 'fabric-backwrd' names no rule (did you mean 'fabric-backward'?); `fabricize --list-rules` lists the ids
// RUN: cd %t && not %lint --ignore fabric-cuda-gard,zzz project -- %flags 2>&1 | FileCheck %s --check-prefix=TYPO2
// TYPO2: error: --ignore: 'fabric-cuda-gard' names no rule (did you mean 'fabric-cuda-guard'?)
// RUN: echo '{"ignore": ["fabric-device-mvoe"]}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/typo.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/typo.err --check-prefix=TYPO3
// TYPO3: error: {{.*}}.fabricize.json: ignore: 'fabric-device-mvoe' names no rule (did you mean 'fabric-device-move'?)
// Values of the wrong type, and JSON that does not parse (with its line and column).
// RUN: echo '{"select": 3}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/type.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/type.err --check-prefix=TYPE
// TYPE: error: {{.*}}.fabricize.json: 'select' must be a list of rule ids or a comma-separated string, not number
// RUN: echo '{"select": ["fabric-backward", 7]}' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/item.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/item.err --check-prefix=ITEM
// ITEM: error: {{.*}}.fabricize.json: 'select' lists rule ids as strings; found number 7
// RUN: printf '{\n  "select": ["fabric-backward",\n}\n' > %t/project/.fabricize.json
// RUN: cd %t && %lint project -- %flags 2> %t/json.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/json.err --check-prefix=JSON
// JSON: error: {{.*}}.fabricize.json:3:1: not valid JSON
#include <torch/torch.h>
int main() {
  auto a = torch::randn({2});
  auto b = a.cuda();
  a.sum().backward();
}
