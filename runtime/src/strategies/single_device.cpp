#include "strategies/single_device.h"

namespace fabric {
namespace detail {

namespace {
// The base class's hooks do nothing: one process has nothing to
// synchronize.
class SingleDeviceStrategy : public Strategy {
 public:
  using Strategy::Strategy;
};
}  // namespace

std::unique_ptr<Strategy> make_single_device_strategy(const StrategyContext& context) {
  return std::make_unique<SingleDeviceStrategy>(context);
}

}  // namespace detail
}  // namespace fabric
