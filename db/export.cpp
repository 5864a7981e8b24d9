// The JSON and CSV exports of `ktune db export` and `ktune db list --json`.
#include "db/store.hpp"

#include "runtime/core/types.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ktune {
namespace {


void append_number(std::string& out, double v, const char* non_finite) {
  if (!std::isfinite(v)) {
    out += non_finite;
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// An ordinal that may be unrecorded (-1): null in JSON, an empty cell in CSV.
struct Unrecorded {
  int value;
};

struct JsonWriter {
  std::string& out;
  bool first = true;

  void key(const char* name) {
    out += first ? "{\"" : ", \"";
    first = false;
    out += name;
    out += "\": ";
  }
  void operator()(const char* name, std::int64_t v) {
    key(name);
    out += std::to_string(v);
  }
  void operator()(const char* name, int v) { (*this)(name, static_cast<std::int64_t>(v)); }
  void operator()(const char* name, Unrecorded v) {
    if (v.value >= 0) return (*this)(name, v.value);
    key(name);
    out += "null";
  }
  void operator()(const char* name, double v) {
    key(name);
    append_number(out, v, "null");
  }
  void operator()(const char* name, std::string_view v) {
    key(name);
    out += '"';
    for (std::size_t i = 0; i < v.size();) {
      const auto c = static_cast<unsigned char>(v[i]);
      if (c >= 0x80) {
        const std::size_t n = utf8_sequence(v, i);
        if (n == 0) {
          out += "\xef\xbf\xbd";  // U+FFFD keeps the output valid UTF-8
          ++i;
        } else {
          out.append(v.substr(i, n));
          i += n;
        }
        continue;
      }
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
    }
    out += '"';
  }
  void close() { out += first ? "{}" : "}"; }
};

struct CsvWriter {
  std::string& out;
  bool header;
  bool first = true;

  void separator() {
    if (!first) out += ',';
    first = false;
  }
  void operator()(const char* name, std::int64_t v) {
    separator();
    out += header ? name : std::to_string(v);
  }
  void operator()(const char* name, int v) { (*this)(name, static_cast<std::int64_t>(v)); }
  void operator()(const char* name, Unrecorded v) {
    if (v.value >= 0 || header) return (*this)(name, v.value);
    separator();
  }
  void operator()(const char* name, double v) {
    separator();
    if (header)
      out += name;
    else
      append_number(out, v, "");
  }
  void operator()(const char* name, std::string_view v) {
    separator();
    if (header) {
      out += name;
      return;
    }
    // A spreadsheet runs a cell that starts with = + - @ (or a tab or CR before one) as a formula:
    // =HYPERLINK(...) in a params key would be a link. A leading quote makes the cell text. Numbers
    // are written by the other overloads and stay numbers.
    const bool formula = !v.empty() && std::string_view("=+-@\t\r").find(v.front()) !=
                                           std::string_view::npos;
    const std::string_view prefix = formula ? "'" : "";
    if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
      out += prefix;
      out += v;
      return;
    }
    out += '"';
    out += prefix;
    for (char c : v) {
      if (c == '"') out += '"';
      out += c;
    }
    out += '"';
  }
};

// The one list of exported trial fields, in order, shared by JSON and CSV.
template <class Visit>
void visit_trial(const TrialRecord& t, Visit&& v) {
  v("id", t.id);
  v("sweep_id", t.sweep_id);
  v("device_key", std::string_view(t.device_key));
  v("op", std::string_view(t.op));
  v("dtype", std::string_view(dtype_name(t.dtype)));
  v("problem_key", std::string_view(t.problem_key));
  v("params_key", std::string_view(t.params_key));
  v("template_hash", std::string_view(t.template_hash));
  v("nvrtc_version", t.nvrtc_version);
  v("status", std::string_view(status_name(t.status)));
  v("detail", std::string_view(t.detail));
  v("median_us", t.median_us);
  v("min_us", t.min_us);
  v("max_us", t.max_us);
  v("spread_pct", t.spread_pct);
  v("repetitions", t.repetitions);
  v("registers", t.registers);
  v("shared_bytes", t.shared_bytes);
  v("local_bytes", t.local_bytes);
  v("spill_bytes", t.spill_bytes);
  v("compile_seconds", t.compile_seconds);
  v("created_at", std::string_view(t.created_at));
  v("device_ordinal", Unrecorded{t.device_ordinal});
  v("pci_bus_id", std::string_view(t.pci_bus_id));
}

}  // namespace

std::string export_json(const std::vector<TrialRecord>& trials) {
  if (trials.empty()) return "[]\n";
  std::string out = "[\n";
  for (std::size_t i = 0; i < trials.size(); ++i) {
    out += "  ";
    JsonWriter w{out};
    visit_trial(trials[i], w);
    w.close();
    out += i + 1 < trials.size() ? ",\n" : "\n";
  }
  out += "]\n";
  return out;
}

std::string export_csv(const std::vector<TrialRecord>& trials) {
  std::string out;
  CsvWriter head{out, true};
  visit_trial(TrialRecord{}, head);
  out += '\n';
  for (const TrialRecord& t : trials) {
    CsvWriter row{out, false};
    visit_trial(t, row);
    out += '\n';
  }
  return out;
}

std::string best_to_json(const BestRecord& b) {
  std::string out;
  JsonWriter w{out};
  w("device_key", std::string_view(b.device_key));
  w("device_name", std::string_view(b.device_name));
  w("arch", std::string_view(b.arch));
  w("op", std::string_view(b.op));
  w("dtype", std::string_view(dtype_name(b.dtype)));
  w("problem_key", std::string_view(b.problem_key));
  w("params_key", std::string_view(b.params_key));
  w("template_hash", std::string_view(b.template_hash));
  w("median_us", b.median_us);
  w("trial_id", b.trial_id);
  w("updated_at", std::string_view(b.updated_at));
  w.close();
  return out;
}

}  // namespace ktune
