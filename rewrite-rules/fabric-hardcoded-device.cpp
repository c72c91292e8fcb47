// Diagnostic: a device with a fixed index (`"cuda:1"`, `Device(kCUDA, 1)`)
// contradicts the Fabric's one-device-per-rank placement; a person decides.
// Index 0 ("cuda:0") is a single-device program's "the GPU": the device
// rules migrate it to fabric.device().
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

Rule makeHardcodedDeviceRule() {
  auto indexed = expr(indexedDevice());
  return {"fabric-hardcoded-device", "+",
          "Report devices with a hard-coded index other than 0 (\"cuda:1\", "
          "torch::Device(torch::kCUDA, 1)): under the Fabric each rank owns one device, "
          "fabric.device(). \"cuda:0\" is migrated like \"cuda\".",
          RuleKind::Diagnostic,
          makeRule(indexed.bind("device"), noopEdit(node("device")),
                   cat("hard-coded device index: each rank trains on fabric.device(); decide "
                       "whether this tensor belongs there"))};
}

}  // namespace fabricize
