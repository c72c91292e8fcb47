// message_of (messages.h): the one function there that knows c10::Error,
// apart so that fabric-run, which has no LibTorch, can build messages.cpp.
#include "utilities/messages.h"

#include <c10/util/Exception.h>

namespace fabric {
namespace detail {

std::string message_of(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace detail
}  // namespace fabric
