#include "runtime/core/types.hpp"

#include <cstdio>

namespace ktune {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::i32: return "int32";
    case DType::e4m3: return "e4m3";
  }
  return "?";
}

std::size_t dtype_size(DType t) {
  if (t == DType::e4m3) return 1;
  return t == DType::f32 || t == DType::i32 ? 4 : 2;
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp16" || s == "f16" || s == "half" || s == "float16") return DType::f16;
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  if (s == "e4m3" || s == "fp8" || s == "fp8_e4m3" || s == "float8_e4m3fn") return DType::e4m3;
  return std::nullopt;
}

std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

namespace {

void append_escape(std::string& out, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default:
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
  }
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        append_escape(out, c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence(s, i);
    // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) act on terminals like ESC sequences.
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
    if (n == 0 || c1) {
      append_escape(out, c);
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string address_text(std::uint64_t address) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
  return buf;
}

std::string quoted(std::string_view s, std::size_t max) {
  if (s.size() <= max) return "\"" + printable(s) + "\"";
  std::size_t cut = max;
  // Do not split a UTF-8 sequence: back up to the start of the character at the cut.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return "\"" + printable(s.substr(0, cut)) + "...\" (" + std::to_string(s.size()) + " bytes)";
}

std::string DeviceInfo::arch() const {
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  // sm_90a unlocks wgmma/setmaxnreg; its CUBIN runs only on 9.0, which is what we compile for.
  if (cc_major == 9 && cc_minor == 0) a += "a";
  return a;
}

std::string DeviceInfo::key() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "|cc%d.%d|%dsm|%lldMiB", cc_major, cc_minor, sm_count,
                static_cast<long long>(memory_bytes >> 20));
  return name + buf;
}

std::optional<DeviceInfo> device_for_arch(std::string_view arch) {
  DeviceInfo d;
  if (arch == "sm_90a" || arch == "sm_90") {
    d.name = "generic sm_90 (H100 SXM limits)";
    d.cc_major = 9;
    d.cc_minor = 0;
    d.sm_count = 132;
    d.memory_bytes = 80LL << 30;
    d.l2_bytes = 50LL << 20;
    d.smem_optin_per_block = 227 * 1024;
    d.smem_per_sm = 228 * 1024;
  } else if (arch == "sm_80") {
    d.name = "generic sm_80 (A100 limits)";
    d.cc_major = 8;
    d.cc_minor = 0;
    d.sm_count = 108;
    d.memory_bytes = 80LL << 30;
    d.l2_bytes = 40LL << 20;
    d.smem_optin_per_block = 163 * 1024;
    d.smem_per_sm = 164 * 1024;
  } else {
    return std::nullopt;
  }
  d.regs_per_block = 65536;
  d.regs_per_sm = 65536;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  return d;
}

}  // namespace ktune
