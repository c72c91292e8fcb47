// See messages.h. No LibTorch: fabric-run compiles this file too.
#include "utilities/messages.h"

#include <unistd.h>

#include <cerrno>

namespace fabric {
namespace detail {

std::string first_line_of(const std::string& text) { return text.substr(0, text.find('\n')); }

void write_stderr_line(std::string text) {
  text += '\n';
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t written = ::write(STDERR_FILENO, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

}  // namespace detail
}  // namespace fabric
