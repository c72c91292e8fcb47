// flagparse.hpp - a small single-header command-line parser for C++17.
//
// Version 0.4.2
//
// Permission is hereby granted, free of charge, to any person obtaining a
// copy of this software and associated documentation files (the
// "Software"), to deal in the Software without restriction, including
// without limitation the rights to use, copy, modify, merge, publish,
// distribute, sublicense, and/or sell copies of the Software, and to permit
// persons to whom the Software is furnished to do so, subject to the
// following conditions: the above notice and this permission notice shall
// be included in all copies or substantial portions of the Software.
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
//
// Usage:
//
//   flagparse::Parser parser("prog", "What prog does");
//   parser.add("epochs", "number of epochs").short_name('e').default_value("10");
//   parser.add_flag("verbose", "chatty output").short_name('v');
//   auto args = parser.parse(argc, argv);      // prints help and exits on --help
//   int epochs = args.get<int>("epochs");
//
#ifndef FLAGPARSE_HPP_INCLUDED
#define FLAGPARSE_HPP_INCLUDED

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define FLAGPARSE_VERSION_MAJOR 0
#define FLAGPARSE_VERSION_MINOR 4
#define FLAGPARSE_VERSION_PATCH 2

namespace flagparse {

class error : public std::runtime_error {
 public:
  explicit error(const std::string& what) : std::runtime_error(what) {}
};

class unknown_option : public error {
 public:
  explicit unknown_option(const std::string& name) : error("unknown option '" + name + "'") {}
};

class missing_value : public error {
 public:
  explicit missing_value(const std::string& name) : error("option '--" + name + "' needs a value") {}
};

class bad_value : public error {
 public:
  bad_value(const std::string& name, const std::string& value, const char* type)
      : error("option '--" + name + "': cannot convert '" + value + "' to " + type) {}
};

namespace detail {

template <class T>
struct type_name {
  static const char* get() { return "value"; }
};
template <>
struct type_name<int> {
  static const char* get() { return "int"; }
};
template <>
struct type_name<long> {
  static const char* get() { return "long"; }
};
template <>
struct type_name<long long> {
  static const char* get() { return "long long"; }
};
template <>
struct type_name<float> {
  static const char* get() { return "float"; }
};
template <>
struct type_name<double> {
  static const char* get() { return "double"; }
};
template <>
struct type_name<bool> {
  static const char* get() { return "bool"; }
};

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

inline std::string to_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

template <class T>
T convert(const std::string& name, const std::string& text) {
  if constexpr (std::is_same<T, std::string>::value) {
    return text;
  } else if constexpr (std::is_same<T, bool>::value) {
    const std::string v = to_lower(text);
    if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
    if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return false;
    throw bad_value(name, text, "bool");
  } else {
    std::istringstream in(text);
    T value{};
    in >> value;
    if (in.fail() || !in.eof()) throw bad_value(name, text, type_name<T>::get());
    return value;
  }
}

// Wraps `text` to `width` columns, indenting continuation lines by `indent`.
inline std::string wrap(const std::string& text, std::size_t width, std::size_t indent) {
  std::ostringstream out;
  std::istringstream words(text);
  std::string word;
  std::size_t column = indent;
  bool first = true;
  while (words >> word) {
    if (!first && column + 1 + word.size() > width) {
      out << '\n' << std::string(indent, ' ');
      column = indent;
    } else if (!first) {
      out << ' ';
      ++column;
    }
    out << word;
    column += word.size();
    first = false;
  }
  return out.str();
}

}  // namespace detail

// One option's declaration; the setters chain.
class Option {
 public:
  Option(std::string name, std::string help, bool is_flag)
      : name_(std::move(name)), help_(std::move(help)), flag_(is_flag) {}

  Option& short_name(char c) {
    short_ = c;
    return *this;
  }
  Option& default_value(std::string v) {
    default_ = std::move(v);
    has_default_ = true;
    return *this;
  }
  Option& metavar(std::string m) {
    metavar_ = std::move(m);
    return *this;
  }
  Option& required() {
    required_ = true;
    return *this;
  }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  char short_char() const { return short_; }
  bool is_flag() const { return flag_; }
  bool has_default() const { return has_default_; }
  bool is_required() const { return required_; }
  const std::string& default_text() const { return default_; }
  std::string metavar_text() const {
    if (!metavar_.empty()) return metavar_;
    std::string m = name_;
    std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) {
      return c == '-' ? '_' : static_cast<char>(std::toupper(c));
    });
    return m;
  }

 private:
  std::string name_;
  std::string help_;
  bool flag_ = false;
  char short_ = 0;
  std::string default_;
  bool has_default_ = false;
  bool required_ = false;
  std::string metavar_;
};

// The parsed command line.
class Result {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }

  // How many times the option was given (0 when only its default applies).
  std::size_t count(const std::string& name) const {
    auto it = counts_.find(name);
    return it == counts_.end() ? 0 : it->second;
  }

  template <class T>
  T get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw error("option '--" + name + "' has no value and no default");
    return detail::convert<T>(name, it->second);
  }

  template <class T>
  T get_or(const std::string& name, T fallback) const {
    return has(name) ? get<T>(name) : fallback;
  }

  const std::vector<std::string>& positional() const { return positional_; }

  // Every option with a value, in name order: `name = value` lines.
  void dump(std::ostream& out = std::cout) const {
    std::size_t width = 0;
    for (const auto& kv : values_) width = std::max(width, kv.first.size());
    for (const auto& kv : values_) {
      out << "  " << std::left << std::setw(static_cast<int>(width)) << kv.first << " = " << kv.second << '\n';
    }
  }

 private:
  friend class Parser;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::size_t> counts_;
  std::vector<std::string> positional_;
};

class Parser {
 public:
  explicit Parser(std::string program, std::string description = "")
      : program_(std::move(program)), description_(std::move(description)) {
    add_flag("help", "show this help and exit").short_name('h');
  }

  Option& add(const std::string& name, const std::string& help) {
    options_.emplace_back(new Option(name, help, false));
    return *options_.back();
  }

  Option& add_flag(const std::string& name, const std::string& help) {
    options_.emplace_back(new Option(name, help, true));
    return *options_.back();
  }

  Parser& epilog(std::string text) {
    epilog_ = std::move(text);
    return *this;
  }

  Parser& positional_help(std::string text) {
    positional_help_ = std::move(text);
    return *this;
  }

  // Parses argv. On --help: prints the help to std::cout and exits 0. On a
  // bad command line: prints the error and the usage to std::cerr and exits 2
  // (call parse_or_throw to handle errors yourself).
  Result parse(int argc, const char* const argv[]) const {
    try {
      Result result = parse_or_throw(argc, argv);
      if (result.count("help") > 0) {
        print_help();
        std::exit(0);
      }
      return result;
    } catch (const error& e) {
      std::cerr << program_ << ": " << e.what() << '\n';
      print_usage(std::cerr);
      std::exit(2);
    }
  }

  Result parse(int argc, char* argv[]) const { return parse(argc, const_cast<const char* const*>(argv)); }

  Result parse_or_throw(int argc, const char* const argv[]) const {
    Result result;
    for (const auto& opt : options_) {
      if (opt->has_default()) result.values_[opt->name()] = opt->default_text();
    }
    bool only_positional = false;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (only_positional || arg == "-" || arg.empty() || arg[0] != '-') {
        result.positional_.push_back(arg);
        continue;
      }
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      std::string name;
      std::string value;
      bool has_inline_value = false;
      const Option* opt = nullptr;
      if (detail::starts_with(arg, "--")) {
        name = arg.substr(2);
        auto eq = name.find('=');
        if (eq != std::string::npos) {
          value = name.substr(eq + 1);
          name = name.substr(0, eq);
          has_inline_value = true;
        }
        opt = find(name);
        if (opt == nullptr && detail::starts_with(name, "no-")) {
          const Option* negated = find(name.substr(3));
          if (negated != nullptr && negated->is_flag()) {
            result.values_[negated->name()] = "false";
            result.counts_[negated->name()] += 1;
            continue;
          }
        }
        if (opt == nullptr) throw unknown_option(arg);
      } else {
        // -x, -xVALUE, or a cluster of flags -abc.
        for (std::size_t k = 1; k < arg.size(); ++k) {
          const Option* s = find_short(arg[k]);
          if (s == nullptr) throw unknown_option(std::string("-") + arg[k]);
          if (s->is_flag()) {
            result.values_[s->name()] = "true";
            result.counts_[s->name()] += 1;
            continue;
          }
          opt = s;
          if (k + 1 < arg.size()) {
            value = arg.substr(k + 1);
            has_inline_value = true;
          }
          break;
        }
        if (opt == nullptr) continue;
        name = opt->name();
      }
      if (opt->is_flag()) {
        result.values_[opt->name()] = has_inline_value ? value : "true";
        result.counts_[opt->name()] += 1;
        continue;
      }
      if (!has_inline_value) {
        if (i + 1 >= argc) throw missing_value(opt->name());
        value = argv[++i];
      }
      result.values_[opt->name()] = value;
      result.counts_[opt->name()] += 1;
    }
    for (const auto& opt : options_) {
      if (opt->is_required() && result.count(opt->name()) == 0) throw missing_value(opt->name());
    }
    return result;
  }

  void print_usage(std::ostream& out = std::cout) const {
    out << "usage: " << program_;
    for (const auto& opt : options_) {
      out << " [";
      if (opt->short_char() != 0) {
        out << '-' << opt->short_char();
      } else {
        out << "--" << opt->name();
      }
      if (!opt->is_flag()) out << ' ' << opt->metavar_text();
      out << ']';
    }
    if (!positional_help_.empty()) out << ' ' << positional_help_;
    out << '\n';
  }

  void print_help(std::ostream& out = std::cout) const {
    print_usage(out);
    if (!description_.empty()) out << '\n' << detail::wrap(description_, 78, 0) << '\n';
    out << "\noptions:\n";
    std::vector<std::string> left;
    std::size_t width = 0;
    for (const auto& opt : options_) {
      std::string l = "  ";
      l += opt->short_char() != 0 ? std::string("-") + opt->short_char() + ", " : std::string("    ");
      l += "--" + opt->name();
      if (!opt->is_flag()) l += " " + opt->metavar_text();
      width = std::max(width, l.size());
      left.push_back(l);
    }
    width = std::min<std::size_t>(width + 2, 34);
    for (std::size_t i = 0; i < options_.size(); ++i) {
      const Option& opt = *options_[i];
      std::string help = opt.help();
      if (opt.has_default() && !opt.is_flag()) help += " (default: " + opt.default_text() + ")";
      out << left[i];
      if (left[i].size() + 1 >= width) {
        out << '\n' << std::string(width, ' ');
      } else {
        out << std::string(width - left[i].size(), ' ');
      }
      out << detail::wrap(help, 78, width) << '\n';
    }
    if (!epilog_.empty()) out << '\n' << detail::wrap(epilog_, 78, 0) << '\n';
  }

  void print_version() const {
    std::cout << program_ << " (flagparse " << FLAGPARSE_VERSION_MAJOR << '.' << FLAGPARSE_VERSION_MINOR << '.'
              << FLAGPARSE_VERSION_PATCH << ")" << std::endl;
  }

  const std::string& program() const { return program_; }

 private:
  const Option* find(const std::string& name) const {
    for (const auto& opt : options_) {
      if (opt->name() == name) return opt.get();
    }
    return nullptr;
  }

  const Option* find_short(char c) const {
    for (const auto& opt : options_) {
      if (opt->short_char() == c) return opt.get();
    }
    return nullptr;
  }

  std::string program_;
  std::string description_;
  std::string epilog_;
  std::string positional_help_;
  std::vector<std::unique_ptr<Option>> options_;
};

}  // namespace flagparse

#endif  // FLAGPARSE_HPP_INCLUDED
