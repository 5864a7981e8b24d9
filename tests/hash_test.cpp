#include "runtime/core/hash.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ktune {
namespace {

// Reference digests: FIPS 180-2 examples, and Python's hashlib for the padding boundaries.
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjkl"
                       "mnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same stream fed in odd-sized pieces.
  Sha256 s;
  const std::string piece(997, 'a');
  std::size_t fed = 0;
  while (fed + piece.size() <= 1000000) {
    s.update(piece);
    fed += piece.size();
  }
  s.update(std::string(1000000 - fed, 'a'));
  EXPECT_EQ(s.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
  };
  for (const auto& [n, hex] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'x')), hex) << n;
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string data;
  for (int i = 0; i < 200; ++i) data += static_cast<char>(i * 7 + 3);
  const std::string whole = sha256_hex(data);
  for (std::size_t split = 0; split <= data.size(); ++split) {
    Sha256 s;
    s.update(std::string_view(data).substr(0, split)).update(std::string_view(data).substr(split));
    ASSERT_EQ(s.hex(), whole) << "split at " << split;
  }
}

TEST(Sha256, DigestDoesNotEndTheStream) {
  Sha256 s;
  s.update("ab");
  EXPECT_EQ(s.hex(), s.hex());
  EXPECT_EQ(s.hex(), sha256_hex("ab"));
  s.update("c");
  EXPECT_EQ(s.hex(), sha256_hex("abc"));
  const auto d = s.digest();
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
}

TEST(Sha256, FieldPrefixesTheLength) {
  const std::string ab_c = Sha256().field("ab").field("c").hex();
  EXPECT_NE(ab_c, Sha256().field("a").field("bc").hex());
  EXPECT_NE(ab_c, sha256_hex("abc"));
  // 8-byte little-endian length, then the bytes (value checked against Python's hashlib).
  EXPECT_EQ(ab_c, "43ee655579de01ca739b3f95c1c2d3f46d353b2c0df818064ea594506cdb2617");
  const std::string prefix("\x02\0\0\0\0\0\0\0", 8);
  EXPECT_EQ(Sha256().field("ab").hex(), Sha256().update(prefix).update("ab").hex());
  EXPECT_NE(Sha256().field("").hex(), sha256_hex(""));
}

TEST(Sha256, HexIsLowercase64) {
  const std::string h = sha256_hex("ktune");
  ASSERT_EQ(h.size(), 64u);
  for (char c : h) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << h;
}

}  // namespace
}  // namespace ktune
