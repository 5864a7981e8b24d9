// SHA-256, for compile-cache keys, template hashes and cache-entry integrity.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ktune {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  /// Feeds a length prefix then the data, so that ("ab","c") and ("a","bc") differ.
  Sha256& field(std::string_view data);
  std::array<std::uint8_t, 32> digest();
  std::string hex();

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace ktune
