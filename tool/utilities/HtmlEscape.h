// Text made safe inside HTML (and SVG): the migration report's page and
// verify's page and pictures escape what they quote from sources and
// programs' output.
#pragma once

#include <string>

namespace fabricize {

inline std::string htmlEscaped(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace fabricize
