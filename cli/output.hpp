// Small output helpers for the CLI: a JSON writer and number formatting.
#pragma once

#include <string>
#include <vector>

namespace ktune::cli {

std::string json_escape(const std::string& s);

/// Builds one JSON value; objects and arrays nest with begin/end.
class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(const std::string& k);
  Json& value(const std::string& v);
  Json& value(const char* v) { return value(std::string(v)); }
  Json& value(double v);
  Json& value(long long v);
  Json& value(int v) { return value(static_cast<long long>(v)); }
  Json& value(bool v);
  Json& null();
  template <typename T>
  Json& field(const std::string& k, const T& v) {
    return key(k).value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void comma();
  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

std::string fmt(const char* format, double v);
/// Pads or truncates each cell to the column width; first row is the header.
std::string table(const std::vector<std::vector<std::string>>& rows);

}  // namespace ktune::cli
