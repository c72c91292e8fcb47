// JSON: every finding with rule id, file, line, column, severity, message
// and its fix-its (offset, length, replacement, range); exit 1.
// RUN: cd %S && %lint --format json --select fabric-backward,fabric-device-move json-format.cpp -- %flags > %t.json; test $? -eq 1
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); f=d['findings']; \
// RUN:   assert [(x['ruleId'],x['line'],x['column']) for x in f]==[('fabric-device-move',14,12),('fabric-backward',16,3)], f; \
// RUN:   assert all(x['file']=='json-format.cpp' and x['severity']=='warning' and x['message'] and not x['fixed'] for x in f), f; \
// RUN:   fx=f[1]['fixes']; assert len(fx)==1 and fx[0]['replacement']=='fabric.backward(loss)', fx; \
// RUN:   src=open(sys.argv[2]).read(); assert src[fx[0]['offset']:fx[0]['offset']+fx[0]['length']]=='loss.backward()', fx; \
// RUN:   assert (fx[0]['line'],fx[0]['column'],fx[0]['endLine'],fx[0]['endColumn'])==(16,3,16,18), fx; \
// RUN:   assert d['notAnalysed']==[] and d['version'], d; print('json OK')" %t.json %s | FileCheck %s
// CHECK: json OK
#include <torch/torch.h>
int main() {
  auto y = torch::randn({2}).cuda();
  auto loss = y.sum();
  loss.backward();
}
