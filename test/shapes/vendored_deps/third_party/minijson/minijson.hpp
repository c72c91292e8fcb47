/*
 * minijson - JSON values, a reader and a writer in one header (C++17).
 * version 1.2.0
 *
 * Distributed under the Boost Software License, Version 1.0.
 *
 *   minijson::value v = minijson::parse(R"({"lr": 0.01, "layers": [32, 32]})");
 *   double lr = v["lr"].as_number();
 *   v["epochs"] = 8;
 *   std::string text = v.dump(2);
 *   minijson::write(v);                 // to std::cout
 */
#ifndef MINIJSON_HPP
#define MINIJSON_HPP

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace minijson {

class value;
using array = std::vector<value>;
using object = std::map<std::string, value>;

class parse_error : public std::runtime_error {
 public:
  parse_error(const std::string& what, std::size_t offset)
      : std::runtime_error("minijson: " + what + " at offset " + std::to_string(offset)), offset_(offset) {}
  std::size_t offset() const { return offset_; }

 private:
  std::size_t offset_;
};

class type_error : public std::runtime_error {
 public:
  explicit type_error(const std::string& what) : std::runtime_error("minijson: " + what) {}
};

class value {
 public:
  enum class kind { null, boolean, number, string, array, object };

  value() : data_(nullptr) {}
  value(std::nullptr_t) : data_(nullptr) {}
  value(bool b) : data_(b) {}
  value(int n) : data_(static_cast<double>(n)) {}
  value(long n) : data_(static_cast<double>(n)) {}
  value(long long n) : data_(static_cast<double>(n)) {}
  value(unsigned n) : data_(static_cast<double>(n)) {}
  value(unsigned long n) : data_(static_cast<double>(n)) {}
  value(float n) : data_(static_cast<double>(n)) {}
  value(double n) : data_(n) {}
  value(const char* s) : data_(std::string(s)) {}
  value(std::string s) : data_(std::move(s)) {}
  value(array a) : data_(std::move(a)) {}
  value(object o) : data_(std::move(o)) {}

  kind type() const { return static_cast<kind>(data_.index()); }
  bool is_null() const { return type() == kind::null; }
  bool is_bool() const { return type() == kind::boolean; }
  bool is_number() const { return type() == kind::number; }
  bool is_string() const { return type() == kind::string; }
  bool is_array() const { return type() == kind::array; }
  bool is_object() const { return type() == kind::object; }

  bool as_bool() const { return get<bool>("bool"); }
  double as_number() const { return get<double>("number"); }
  int as_int() const { return static_cast<int>(std::lround(as_number())); }
  const std::string& as_string() const { return get<std::string>("string"); }
  const array& as_array() const { return get<array>("array"); }
  array& as_array() { return get<array>("array"); }
  const object& as_object() const { return get<object>("object"); }
  object& as_object() { return get<object>("object"); }

  // Object access; a null value becomes an object on first use.
  value& operator[](const std::string& key) {
    if (is_null()) data_ = object{};
    return get<object>("object")[key];
  }
  const value& operator[](const std::string& key) const {
    const object& o = as_object();
    auto it = o.find(key);
    if (it == o.end()) throw type_error("no key '" + key + "'");
    return it->second;
  }
  value& operator[](std::size_t i) { return as_array().at(i); }
  const value& operator[](std::size_t i) const { return as_array().at(i); }

  bool contains(const std::string& key) const { return is_object() && as_object().count(key) > 0; }
  std::size_t size() const {
    if (is_array()) return as_array().size();
    if (is_object()) return as_object().size();
    return 0;
  }
  void push_back(value v) {
    if (is_null()) data_ = array{};
    as_array().push_back(std::move(v));
  }

  // Typed lookup with a fallback for missing keys.
  double number_or(const std::string& key, double fallback) const {
    return contains(key) ? (*this)[key].as_number() : fallback;
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    return contains(key) ? (*this)[key].as_string() : fallback;
  }

  std::string dump(int indent = -1) const {
    std::ostringstream out;
    write_to(out, indent, 0);
    return out.str();
  }

  void write_to(std::ostream& out, int indent, int depth) const {
    switch (type()) {
      case kind::null:
        out << "null";
        break;
      case kind::boolean:
        out << (std::get<bool>(data_) ? "true" : "false");
        break;
      case kind::number:
        write_number(out, std::get<double>(data_));
        break;
      case kind::string:
        write_string(out, std::get<std::string>(data_));
        break;
      case kind::array: {
        const array& a = std::get<array>(data_);
        if (a.empty()) {
          out << "[]";
          break;
        }
        out << '[';
        for (std::size_t i = 0; i < a.size(); ++i) {
          if (i > 0) out << ',';
          newline(out, indent, depth + 1);
          a[i].write_to(out, indent, depth + 1);
        }
        newline(out, indent, depth);
        out << ']';
        break;
      }
      case kind::object: {
        const object& o = std::get<object>(data_);
        if (o.empty()) {
          out << "{}";
          break;
        }
        out << '{';
        bool first = true;
        for (const auto& kv : o) {
          if (!first) out << ',';
          first = false;
          newline(out, indent, depth + 1);
          write_string(out, kv.first);
          out << (indent >= 0 ? ": " : ":");
          kv.second.write_to(out, indent, depth + 1);
        }
        newline(out, indent, depth);
        out << '}';
        break;
      }
    }
  }

  friend bool operator==(const value& a, const value& b) { return a.data_ == b.data_; }
  friend bool operator!=(const value& a, const value& b) { return !(a == b); }

 private:
  template <class T>
  const T& get(const char* name) const {
    if (const T* p = std::get_if<T>(&data_)) return *p;
    throw type_error(std::string("value is not a ") + name);
  }
  template <class T>
  T& get(const char* name) {
    if (T* p = std::get_if<T>(&data_)) return *p;
    throw type_error(std::string("value is not a ") + name);
  }

  static void newline(std::ostream& out, int indent, int depth) {
    if (indent < 0) return;
    out << '\n' << std::string(static_cast<std::size_t>(indent * depth), ' ');
  }

  static void write_number(std::ostream& out, double d) {
    if (!std::isfinite(d)) {
      out << "null";
      return;
    }
    if (d == std::floor(d) && std::fabs(d) < 1e15) {
      out << static_cast<long long>(d);
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    out << buf;
  }

  static void write_string(std::ostream& out, const std::string& s) {
    out << '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': out << "\\\""; break;
        case '\\': out << "\\\\"; break;
        case '\n': out << "\\n"; break;
        case '\r': out << "\\r"; break;
        case '\t': out << "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out << buf;
          } else {
            out << c;
          }
      }
    }
    out << '"';
  }

  std::variant<std::nullptr_t, bool, double, std::string, array, object> data_;
};

namespace detail {

class reader {
 public:
  explicit reader(const std::string& text) : s_(text) {}

  value document() {
    value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) throw parse_error("trailing characters", pos_);
    return v;
  }

 private:
  static constexpr int max_depth = 256;

  void skip_ws() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
        // Comments are an extension: config files written by people have them.
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  char peek() {
    skip_ws();
    if (pos_ >= s_.size()) throw parse_error("unexpected end of input", pos_);
    return s_[pos_];
  }

  void expect(char c) {
    if (peek() != c) throw parse_error(std::string("expected '") + c + "'", pos_);
    ++pos_;
  }

  bool consume_word(const char* word) {
    std::size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }

  value parse_value(int depth) {
    if (depth > max_depth) throw parse_error("nesting too deep", pos_);
    char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return value(parse_string());
    if (c == '-' || (c >= '0' && c <= '9')) return value(parse_number());
    if (consume_word("true")) return value(true);
    if (consume_word("false")) return value(false);
    if (consume_word("null")) return value(nullptr);
    throw parse_error(std::string("unexpected character '") + c + "'", pos_);
  }

  value parse_object(int depth) {
    expect('{');
    object o;
    if (peek() == '}') {
      ++pos_;
      return value(std::move(o));
    }
    while (true) {
      if (peek() != '"') throw parse_error("expected a key", pos_);
      std::string key = parse_string();
      expect(':');
      o[key] = parse_value(depth + 1);
      char c = peek();
      ++pos_;
      if (c == '}') break;
      if (c != ',') throw parse_error("expected ',' or '}'", pos_ - 1);
    }
    return value(std::move(o));
  }

  value parse_array(int depth) {
    expect('[');
    array a;
    if (peek() == ']') {
      ++pos_;
      return value(std::move(a));
    }
    while (true) {
      a.push_back(parse_value(depth + 1));
      char c = peek();
      ++pos_;
      if (c == ']') break;
      if (c != ',') throw parse_error("expected ',' or ']'", pos_ - 1);
    }
    return value(std::move(a));
  }

  double parse_number() {
    std::size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '+' || s_[pos_] == '-')) {
      ++pos_;
    }
    const std::string text = s_.substr(start, pos_ - start);
    char* end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) throw parse_error("bad number '" + text + "'", start);
    return d;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) throw parse_error("unterminated string", pos_);
      char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) throw parse_error("unterminated escape", pos_);
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) throw parse_error("short \\u escape", pos_);
          unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
          append_utf8(out, cp);
          break;
        }
        default:
          throw parse_error(std::string("bad escape '\\") + e + "'", pos_ - 1);
      }
    }
    return out;
  }

  const std::string& s_;
  std::size_t pos_ = 0;
};

}  // namespace detail

inline value parse(const std::string& text) { return detail::reader(text).document(); }

inline value parse_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("minijson: cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse(buffer.str());
}

// Writes `v` followed by a newline; to std::cout unless told otherwise.
inline void write(const value& v, std::ostream& out = std::cout, int indent = 2) {
  v.write_to(out, indent, 0);
  out << '\n';
}

inline bool save_file(const value& v, const std::string& path, int indent = 2) {
  std::ofstream out(path);
  if (!out) return false;
  write(v, out, indent);
  return static_cast<bool>(out);
}

inline std::ostream& operator<<(std::ostream& out, const value& v) {
  v.write_to(out, -1, 0);
  return out;
}

}  // namespace minijson

#endif  // MINIJSON_HPP
