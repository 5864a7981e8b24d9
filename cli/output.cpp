#include "cli/output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ktune::cli {

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o;
}

void Json::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ",";
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  comma();
  out_ += "{";
  first_.push_back(true);
  return *this;
}
Json& Json::end_object() {
  out_ += "}";
  first_.pop_back();
  return *this;
}
Json& Json::begin_array() {
  comma();
  out_ += "[";
  first_.push_back(true);
  return *this;
}
Json& Json::end_array() {
  out_ += "]";
  first_.pop_back();
  return *this;
}
Json& Json::key(const std::string& k) {
  comma();
  out_ += "\"" + json_escape(k) + "\":";
  after_key_ = true;
  return *this;
}
Json& Json::value(const std::string& v) {
  comma();
  out_ += "\"" + json_escape(v) + "\"";
  return *this;
}
Json& Json::value(double v) {
  comma();
  if (!std::isfinite(v)) {
    out_ += "null";
  } else {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    out_ += b;
  }
  return *this;
}
Json& Json::value(long long v) {
  comma();
  out_ += std::to_string(v);
  return *this;
}
Json& Json::value(bool v) {
  comma();
  out_ += v ? "true" : "false";
  return *this;
}
Json& Json::null() {
  comma();
  out_ += "null";
  return *this;
}

std::string fmt(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace ktune::cli
