#include "RuleFactories.h"

#include <cctype>

namespace fabricize {

bool isPlainOptionValue(const std::string& value) {
  if (value.empty()) return false;
  for (char c : value)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == '.'))
      return false;
  return true;
}

std::vector<Rule> buildCatalogue(const FabricOptions& options) {
  // Order matters only for insertions at one place: the Fabric is
  // constructed before it is launched.
  return {
      makeInsertFabricRule(options),   makeLaunchRule(options),
      makeSetupRule(options),          makeSetupDataLoaderRule(options),
      makeBatchToDeviceRule(options),
      makeCudaGuardRule(options),      makeDeviceMoveRule(options),
      makeDeviceVariableRule(options), makeBackwardRule(options),
      makeStepRule(options),           makeAutocastRule(options),
      makeNoBackwardSyncRule(options),
      makeRankZeroPrintRule(options),  makeRankZeroFileRule(options),
      makeCheckpointRule(options),     makeReduceMetricRule(options),
      makePerRankMetricRule(options),
      makeDataParallelRule(options),   makeThreadFabricRule(options),
      makeHardcodedDeviceRule(options),
      makeCudaRuntimeRule(options),    makeManualAllReduceRule(options),
      makeDivergentExitRule(options),  makeOwnDataLoaderRule(options),
  };
}

}  // namespace fabricize
