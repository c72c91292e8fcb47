// Words for the user: error text without LibTorch's backtrace, and stderr
// lines that never interleave across ranks. No LibTorch here, so the
// launcher (compiled without it) can use them too.
#pragma once

#include <exception>
#include <string>

namespace fabric {
namespace detail {

// The message of any exception, without LibTorch's backtrace.
std::string message_of(const std::exception& error);
std::string first_line_of(const std::string& text);

// One write(2) per line (plus '\n'), so that lines of different ranks never
// interleave.
void write_stderr_line(std::string text);

}  // namespace detail
}  // namespace fabric
