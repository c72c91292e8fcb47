// The migration report a team plans with (--report plan.md / plan.html,
// beside the JSON report's summary): what was migrated automatically, what
// needs a person, what the tool did not understand (code in a macro), per
// rule and per file, with the share migrated automatically.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not %fabricize %s --diff --quiet --report %t/plan.md --report %t/plan.html --report %t/plan.json -- %flags > /dev/null
// RUN: FileCheck %s --input-file=%t/plan.md --check-prefix=MD
// RUN: FileCheck %s --input-file=%t/plan.html --check-prefix=HTML
// RUN: FileCheck %s --input-file=%t/plan.json --check-prefix=JSON
#include <torch/torch.h>

#define BACKWARD(loss) loss.backward()

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Device second("cuda:1");
  (void)second;
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::ones({2, 4})).sum();
    BACKWARD(loss);
    optimizer.step();
  }
  return 0;
}
// MD: # Migration report:
// MD: Training constructs found: 7; 5 migrated automatically (71%), 1 need a person, 1 not understood by the tool. 1 training loop: data sharded 0 (0 split, 0 drawn per rank), needs a person 0, not a data loop 1.
// A loop over a fixed input made in the loop reads no data per step: nothing to split, nothing to report.
// MD: ## What needs a person
// MD-EMPTY:
// MD-NEXT: - migration-report.cpp:17 [fabric-hardcoded-device] (needs a person): hard-coded device index
// MD-NEXT: - migration-report.cpp:22 [fabric-backward] (not understood): not migrated: the code is inside a macro expansion
// MD: ## Data sharded
// MD: | migration-report.cpp:19 | not a data loop | it reads no data per step (a fixed input made in the loop) |
// MD: ## Where the Fabric goes
// MD: - migration-report.cpp:14: construct the Fabric at the top of main [fabric-insert]
// MD: | rule | migrated automatically | needs a person | not understood |
// MD: | fabric-autocast | 1 | 0 | 0 |
// MD: | fabric-backward | 0 | 0 | 1 |
// MD: | fabric-hardcoded-device | 0 | 1 | 0 |
// MD: | fabric-step | 1 | 0 | 0 |
// MD: ### migration-report.cpp
// MD: | 17 | fabric-hardcoded-device | hard-coded device index{{.*}} | needs a person |
// MD: | 22 | fabric-backward | not migrated: the code is inside a macro expansion {{.*}} | not understood |
// MD: | 23 | fabric-step | {{.*}} | migrated automatically |
// Each file's change, code before (-) and after (+) with its context.
// MD: The change, before (-) and after (+):
// MD: ```diff
// MD-NEXT: --- a/migration-report.cpp
// MD-NEXT: +++ b/migration-report.cpp
// MD: {{^}}-    optimizer.step();
// MD-NEXT: {{^}}+    fabric.step(optimizer);
// MD: ```
// HTML: <!DOCTYPE html>
// HTML: <h1>Migration report: {{.*}}</h1>
// HTML: <tr><td>fabric-backward</td><td>0</td><td>0</td><td>1</td></tr>
// HTML: <td>not migrated: the code is inside a macro expansion {{.*}}</td><td>not understood</td></tr>
// HTML: <pre class="diff"><span class="file">--- a/migration-report.cpp</span>
// HTML-SAME: <span class="del">-    optimizer.step();</span><span class="add">+    fabric.step(optimizer);</span>
// JSON: "summary": {
// JSON-DAG: "automatic_percent": 71.{{[0-9]+}}
// JSON-DAG: "migrated_automatically": 5
// JSON-DAG: "needs_a_person": 1
// JSON-DAG: "not_understood": 1
