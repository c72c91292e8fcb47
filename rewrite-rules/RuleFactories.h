// One factory per rule file; Catalogue.cpp lists them in application order.
#pragma once

#include "Rule.h"

namespace fabricize {

Rule makeInsertFabricRule(const FabricOptions&);
Rule makeLaunchRule(const FabricOptions&);
Rule makeSetupRule(const FabricOptions&);
Rule makeSetupDataLoaderRule(const FabricOptions&);
Rule makeCudaGuardRule(const FabricOptions&);
Rule makeDeviceMoveRule(const FabricOptions&);
Rule makeDeviceVariableRule(const FabricOptions&);
Rule makeBackwardRule(const FabricOptions&);
Rule makeStepRule(const FabricOptions&);
Rule makeAutocastRule(const FabricOptions&);
Rule makeNoBackwardSyncRule(const FabricOptions&);
Rule makeRankZeroPrintRule(const FabricOptions&);
Rule makeRankZeroFileRule(const FabricOptions&);
Rule makeBatchToDeviceRule(const FabricOptions&);
Rule makeCheckpointRule(const FabricOptions&);
Rule makeHardcodedDeviceRule(const FabricOptions&);
Rule makeDataParallelRule(const FabricOptions&);
Rule makeThreadFabricRule(const FabricOptions&);
Rule makeCudaRuntimeRule(const FabricOptions&);
Rule makeManualAllReduceRule(const FabricOptions&);
Rule makeReduceMetricRule(const FabricOptions&);
Rule makePerRankMetricRule(const FabricOptions&);
Rule makeDivergentExitRule(const FabricOptions&);
Rule makeOwnDataLoaderRule(const FabricOptions&);

}  // namespace fabricize
