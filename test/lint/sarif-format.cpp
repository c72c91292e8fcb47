// SARIF 2.1.0 for GitHub code scanning: the structure is checked field by
// field by Inputs/check_sarif.py, with the expected results.
// RUN: cd %S && %lint --format sarif sarif-format.cpp -- %flags > %t.sarif; test $? -eq 1
// RUN: %python %S/Inputs/check_sarif.py %t.sarif fabric-insert:16 fabric-launch:16 fabric-device-move:17 fabric-backward:19
// --output-file writes the same report to a file.
// RUN: cd %S && %lint --format sarif --output-file %t.file.sarif sarif-format.cpp -- %flags > %t.stdout; test $? -eq 1
// RUN: test ! -s %t.stdout && diff %t.sarif %t.file.sarif
// Columns count UTF-16 code units: 'ü' is 1, '😀' is 2 (4 bytes in UTF-8).
// RUN: %python -c "import json,sys; r=[x for x in json.load(open(sys.argv[1]))['runs'][0]['results'] if x['ruleId']=='fabric-device-move'][0]; \
// RUN:   line=open(sys.argv[2], encoding='utf-8').read().splitlines()[16]; want=sum(2 if ord(c)>0xFFFF else 1 for c in line[:line.index('torch::randn')])+1; \
// RUN:   got=r['locations'][0]['physicalLocation']['region']['startColumn']; assert got==want==22, (got, want); \
// RUN:   d=r['fixes'][0]['artifactChanges'][0]['replacements'][0]['deletedRegion']; assert d['startColumn']==22 and d['endColumn']==22+len('torch::randn({2}).cuda()'), d" %t.sarif %s
// The checker fails on a report that lacks a result.
// RUN: not %python %S/Inputs/check_sarif.py %t.sarif fabric-insert:16 fabric-launch:16 fabric-backward:19
#include <torch/torch.h>
int main() {
  /* ü😀 */ auto y = torch::randn({2}).cuda();
  auto loss = y.sum();
  loss.backward();
}
