// A command-line parser the project copied in (third_party/): never edited.
#pragma once
#include <iostream>
#include <string>

namespace flags {
inline void usage(const std::string& program, std::ostream& out = std::cout) {
  out << "usage: " << program << " [--epochs N]\n";
}
inline void banner(int epochs) { std::cout << "epochs " << epochs << "\n"; }
}  // namespace flags
