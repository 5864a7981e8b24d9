#include "templates/op.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "ktune/error.hpp"
#include "runtime/core/hash.hpp"
#include "runtime/core/types.hpp"
#include "templates/common/check_args.h"
#include "templates/embedded.hpp"
#include "templates/params_over.hpp"

namespace ktune {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.push_back(trim(s.substr(start, end == std::string_view::npos ? end : end - start)));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

template <typename Items, typename Name>
std::string join(const Items& items, Name name) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += name(item);
  }
  return out;
}

std::string dim_names(const std::vector<DimSpec>& dims) {
  return join(dims, [](const DimSpec& d) { return d.name; });
}
std::string tunable_names(const std::vector<Tunable>& tunables) {
  return join(tunables, [](const Tunable& t) { return t.name; });
}

enum class IntParse { ok, not_integer, overflow };

IntParse parse_int(std::string_view s, std::int64_t& value) {
  if (s.empty()) return IntParse::not_integer;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (ec == std::errc::result_out_of_range) return IntParse::overflow;
  if (ec != std::errc() || ptr != end) return IntParse::not_integer;
  return IntParse::ok;
}

/// One "name=value" item of a key string, resolved to the index of its name.
struct KeyItem {
  std::size_t index;
  std::string_view value;
};

/// Splits "a=1,b=2" and resolves each name against `items` (dims or tunables; `kind` names them
/// in messages). On a malformed, unknown or repeated item, returns nothing and sets `error`.
template <typename Items>
std::vector<KeyItem> key_items(std::string_view body, const Items& items, const char* kind,
                               const std::string& names, std::string& error) {
  std::vector<KeyItem> out;
  std::vector<bool> seen(items.size(), false);
  for (std::string_view item : split(body, ',')) {
    if (item.empty()) {
      error = "empty item (expected name=value items separated by commas)";
      return {};
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      error = ktune::quoted(item) + " is not name=value";
      return {};
    }
    const std::string_view key = trim(item.substr(0, eq));
    const auto it = std::find_if(items.begin(), items.end(),
                                 [&](const auto& x) { return x.name == key; });
    if (it == items.end()) {
      error = "unknown " + std::string(kind) + " " + ktune::quoted(key) + " (" + kind + "s: " + names + ")";
      return {};
    }
    const std::size_t index = static_cast<std::size_t>(it - items.begin());
    if (seen[index]) {
      error = std::string(kind) + " " + it->name + " is given twice";
      return {};
    }
    seen[index] = true;
    out.push_back({index, trim(item.substr(eq + 1))});
  }
  return out;
}

std::string range_text(const DimSpec& d) {
  return "allowed " + std::to_string(d.min) + ".." + std::to_string(d.max);
}

/// Why `text` is not a value of dim `d` (nullopt when it is); the value goes to `value`.
std::optional<std::string> parse_dim_value(const DimSpec& d, std::string_view text,
                                           std::int64_t& value) {
  if (d.enumerated()) {
    const auto it = std::find(d.choices.begin(), d.choices.end(), text);
    if (it == d.choices.end())
      return d.name + "=" + ktune::quoted(text) + " is not one of " +
             join(d.choices, [](const std::string& c) { return c; });
    value = it - d.choices.begin();
    return std::nullopt;
  }
  switch (parse_int(text, value)) {
    case IntParse::not_integer:
      return d.name + "=" + ktune::quoted(text) + " is not an integer";
    case IntParse::overflow:
      return d.name + "=" + ktune::quoted(text) + " is out of range (" + range_text(d) + ")";
    case IntParse::ok:
      break;
  }
  if (value < d.min || value > d.max)
    return d.name + "=" + std::to_string(value) + " is out of range (" + range_text(d) + ")";
  return std::nullopt;
}

/// Why `value` is not a value of dim `d`, or nullopt.
std::optional<std::string> dim_value_reason(const DimSpec& d, std::int64_t value) {
  if (d.enumerated()) {
    if (value < 0 || value >= static_cast<std::int64_t>(d.choices.size()))
      return d.name + "=" + std::to_string(value) + " is not a choice index (allowed 0.." +
             std::to_string(d.choices.size() - 1) + ")";
    return std::nullopt;
  }
  if (value < d.min || value > d.max)
    return d.name + "=" + std::to_string(value) + " is out of range (" + range_text(d) + ")";
  return std::nullopt;
}

std::string values_text(const std::vector<std::int64_t>& values) {
  return join(values, [](std::int64_t v) { return std::to_string(v); });
}

/// Why `value` is not one of tunable `t`'s values, or nullopt.
std::optional<std::string> tunable_value_reason(const Tunable& t, std::int64_t value) {
  if (std::find(t.values.begin(), t.values.end(), value) != t.values.end()) return std::nullopt;
  return t.name + "=" + std::to_string(value) + " is not one of " + values_text(t.values);
}

bool under(std::string_view path, std::string_view folder) {
  return path.size() > folder.size() && path.substr(0, folder.size()) == folder &&
         path[folder.size()] == '/';
}

/// The error of a parameter text `text` of op `op`.
InvalidArgument params_error(std::string_view op, std::string_view text, const std::string& why) {
  return InvalidArgument("invalid parameters " + ktune::quoted(text) + " for " + std::string(op) +
                         ": " + why);
}

/// The values `text` names, by tunable index (nullopt where it names none), each checked against
/// its tunable's list; `fail` makes the error.
template <typename Fail>
std::vector<std::optional<std::int64_t>> given_values(std::string_view text,
                                                      const std::vector<Tunable>& ts,
                                                      const Fail& fail) {
  std::vector<std::optional<std::int64_t>> given(ts.size());
  const std::string_view body = trim(text);
  if (body.empty()) return given;
  std::string error;
  const std::vector<KeyItem> items = key_items(body, ts, "parameter", tunable_names(ts), error);
  if (!error.empty()) throw fail(error);
  for (const KeyItem& item : items) {
    const Tunable& t = ts[item.index];
    std::int64_t v = 0;
    if (parse_int(item.value, v) != IntParse::ok)
      throw fail(t.name + "=" + ktune::quoted(item.value) + " is not one of " + values_text(t.values));
    if (auto why = tunable_value_reason(t, v)) throw fail(*why);
    given[item.index] = v;
  }
  return given;
}

}  // namespace

// ---- problems ----

std::string Op::problem_key(const Problem& p) const {
  const std::vector<DimSpec>& ds = dims();
  std::string out;
  for (std::size_t i = 0; i < ds.size() && i < p.values.size(); ++i) {
    const std::int64_t v = p.values[i];
    if (!ds[i].keyed_at_default && ds[i].def && v == *ds[i].def) continue;
    if (!out.empty()) out += ',';
    out += ds[i].name;
    out += '=';
    if (ds[i].enumerated() && v >= 0 && v < static_cast<std::int64_t>(ds[i].choices.size()))
      out += ds[i].choices[static_cast<std::size_t>(v)];
    else
      out += std::to_string(v);
  }
  return out;
}

Problem Op::parse_problem(std::string_view text) const {
  const std::vector<DimSpec>& ds = dims();
  const auto fail = [&](const std::string& why) -> InvalidArgument {
    return InvalidArgument("invalid shape " + ktune::quoted(text) + " for " + std::string(name()) +
                           ": " + why);
  };
  const std::string_view body = trim(text);
  if (body.empty()) throw fail("empty shape (expected e.g. \"m=16384,n=4096\" or \"16384x4096\")");

  std::vector<std::optional<std::int64_t>> given(ds.size());
  if (body.find('=') != std::string_view::npos) {
    std::string error;
    const std::vector<KeyItem> items = key_items(body, ds, "dimension", dim_names(ds), error);
    if (!error.empty()) throw fail(error);
    for (const KeyItem& item : items) {
      std::int64_t v = 0;
      if (auto why = parse_dim_value(ds[item.index], item.value, v)) throw fail(*why);
      given[item.index] = v;
    }
  } else {
    std::vector<std::size_t> integer_dims;
    for (std::size_t i = 0; i < ds.size(); ++i)
      if (!ds[i].enumerated()) integer_dims.push_back(i);
    const std::vector<std::string_view> parts = split(body, 'x');
    if (parts.size() > integer_dims.size())
      throw fail(std::to_string(parts.size()) + " values given, but " + std::string(name()) +
                 " has " + std::to_string(integer_dims.size()) + " integer dimensions (" +
                 join(integer_dims, [&](std::size_t i) { return ds[i].name; }) + ")");
    for (std::size_t k = 0; k < parts.size(); ++k) {
      std::int64_t v = 0;
      // Without '=' the text is read as integers; when a part is not even number-like (",",
      // "abc"), say what a shape is rather than blame a dimension the user never named.
      if (std::none_of(parts[k].begin(), parts[k].end(),
                       [](char c) { return c >= '0' && c <= '9'; }))
        throw fail(ktune::quoted(parts[k]) + " is not an integer; a shape is name=value items (" +
                   dim_names(ds) + ") or the integer dimensions in order separated by x");
      if (auto why = parse_dim_value(ds[integer_dims[k]], parts[k], v)) throw fail(*why);
      given[integer_dims[k]] = v;
    }
  }

  Problem p;
  p.values.reserve(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    if (given[i]) {
      p.values.push_back(*given[i]);
    } else if (ds[i].def) {
      p.values.push_back(*ds[i].def);
    } else {
      throw fail("missing dimension " + ds[i].name);
    }
  }
  if (auto why = problem_reason(p)) throw fail(*why);
  return p;
}

void Op::check_problem(const Problem& p) const {
  const std::vector<DimSpec>& ds = dims();
  if (p.values.size() != ds.size())
    throw InvalidArgument("invalid problem for " + std::string(name()) + ": expected " +
                          std::to_string(ds.size()) + " values (" + dim_names(ds) + "), got " +
                          std::to_string(p.values.size()));
  for (std::size_t i = 0; i < ds.size(); ++i)
    if (auto why = dim_value_reason(ds[i], p.values[i]))
      throw InvalidArgument("invalid problem \"" + problem_key(p) + "\" for " +
                            std::string(name()) + ": " + *why);
  if (auto why = problem_reason(p))
    throw InvalidArgument("invalid problem \"" + problem_key(p) + "\" for " +
                          std::string(name()) + ": " + *why);
}

std::int64_t Op::dim(const Problem& p, std::string_view dim_name) const {
  const std::vector<DimSpec>& ds = dims();
  for (std::size_t i = 0; i < ds.size(); ++i) {
    if (ds[i].name != dim_name) continue;
    if (i >= p.values.size())
      throw InvalidArgument("problem for " + std::string(name()) + " has no value for " +
                            ds[i].name);
    return p.values[i];
  }
  throw InvalidArgument(std::string(name()) + " has no dimension \"" + std::string(dim_name) +
                        "\" (dimensions: " + dim_names(ds) + ")");
}

// ---- parameters ----

std::string Op::params_key(const Params& p) const {
  const std::vector<Tunable>& ts = tunables();
  std::string out;
  for (std::size_t i = 0; i < ts.size() && i < p.values.size(); ++i) {
    if (ts[i].unkeyed_value && p.values[i] == *ts[i].unkeyed_value) continue;
    if (!out.empty()) out += ',';
    out += ts[i].name;
    out += '=';
    out += std::to_string(p.values[i]);
  }
  return out;
}

Params Op::parse_params(std::string_view text) const {
  const std::vector<Tunable>& ts = tunables();
  const auto fail = [&](const std::string& why) { return params_error(name(), text, why); };
  std::vector<std::optional<std::int64_t>> given = given_values(text, ts, fail);
  Params p;
  p.values.reserve(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!given[i] && ts[i].unkeyed_value) given[i] = ts[i].unkeyed_value;
    if (!given[i]) throw fail("missing parameter " + ts[i].name);
    p.values.push_back(*given[i]);
  }
  return p;
}

Params parse_params_over(const Op& op, std::string_view text, const Params& base) {
  const std::vector<Tunable>& ts = op.tunables();
  const auto fail = [&](const std::string& why) { return params_error(op.name(), text, why); };
  if (auto why = op.check_params(base)) throw fail("the base configuration: " + *why);
  const std::vector<std::optional<std::int64_t>> given = given_values(text, ts, fail);
  Params p = base;
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (given[i]) p.values[i] = *given[i];
  return p;
}

std::optional<std::string> Op::check_params(const Params& p) const {
  const std::vector<Tunable>& ts = tunables();
  if (p.values.size() != ts.size())
    return "expected " + std::to_string(ts.size()) + " parameter values (" + tunable_names(ts) +
           "), got " + std::to_string(p.values.size());
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (auto why = tunable_value_reason(ts[i], p.values[i])) return why;
  return std::nullopt;
}

std::size_t Op::param_index(std::string_view param_name) const {
  const std::vector<Tunable>& ts = tunables();
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].name == param_name) return i;
  throw InvalidArgument(std::string(name()) + " has no parameter \"" + std::string(param_name) +
                        "\" (parameters: " + tunable_names(ts) + ")");
}

std::int64_t Op::param(const Params& p, std::string_view param_name) const {
  const std::size_t i = param_index(param_name);
  if (i >= p.values.size())
    throw InvalidArgument("parameters for " + std::string(name()) + " have no value for " +
                          std::string(param_name));
  return p.values[i];
}

// ---- defaults shared by every op ----

std::vector<std::string_view> Op::source_files() const {
  // Every embedded file of the family, then whatever they #include "...", transitively: the
  // code the op's kernels are compiled from, and nothing else (a file added to common/ for
  // another family does not make this op's tuned rows stale).
  std::vector<std::string_view> files;
  std::vector<std::string_view> todo;
  const auto add = [&](std::string_view path) {
    if (std::find(files.begin(), files.end(), path) != files.end()) return;
    files.push_back(path);
    todo.push_back(path);
  };
  for (const EmbeddedFile& f : embedded_files())
    if (under(f.path, family())) add(f.path);
  while (!todo.empty()) {
    const EmbeddedFile* f = find_embedded(todo.back());
    todo.pop_back();
    if (f == nullptr) continue;
    for (std::size_t at = f->text.find("#include"); at != std::string_view::npos;
         at = f->text.find("#include", at + 1)) {
      const std::size_t open = f->text.find_first_not_of(" \t", at + 8);
      if (open == std::string_view::npos || f->text[open] != '"') continue;
      const std::size_t close = f->text.find('"', open + 1);
      if (close == std::string_view::npos) continue;
      const std::string_view included = f->text.substr(open + 1, close - open - 1);
      if (const EmbeddedFile* g = find_embedded(included)) add(g->path);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Op::template_hash() const {
  Sha256 h;
  h.field(name());
  h.field(std::to_string(version()));
  for (std::string_view path : source_files()) {
    h.field(path);
    h.field(find_embedded(path)->text);
  }
  return h.hex();
}

std::optional<std::string> Op::invalid_after_compile(
    const Params& params, const Problem& problem, DType t, const DeviceInfo& device,
    const std::vector<KernelResources>& resources) const {
  const std::vector<KernelSource> sources = kernels(params, problem, t);
  for (std::size_t i = 0; i < resources.size(); ++i) {
    const KernelResources& r = resources[i];
    const std::string which =
        "kernel " + std::to_string(i) +
        (i < sources.size() ? " (" + sources[i].name_expression + ")" : std::string());
    const long long threads = block_threads(params, problem, t, i);
    if (device.max_threads_per_block > 0 && threads > device.max_threads_per_block)
      return which + " runs " + std::to_string(threads) + " threads per block (device allows " +
             std::to_string(device.max_threads_per_block) + ")";
    // Registers are allocated per warp in units of 256, i.e. 8 per thread.
    const long long regs = (r.registers + 7) / 8 * 8;
    if (device.regs_per_block > 0 && regs * threads > device.regs_per_block)
      return which + " needs " + std::to_string(r.registers) + " registers x " +
             std::to_string(threads) + " threads = " + std::to_string(regs * threads) +
             " registers per block (device allows " + std::to_string(device.regs_per_block) + ")";
    const long long smem =
        static_cast<long long>(r.shared_bytes) + dynamic_shared_bytes(params, problem, t, i);
    if (device.smem_optin_per_block > 0 && smem > device.smem_optin_per_block)
      return which + " needs " + std::to_string(smem) +
             " bytes of shared memory per block (device allows " +
             std::to_string(device.smem_optin_per_block) + ")";
    // Spills to local memory are slow, not wrong: timing decides.
  }
  return std::nullopt;
}

std::optional<std::string> Op::point_reason(const Params& params, const Problem& problem,
                                            DType t) const {
  const std::vector<DType> ok = dtypes();
  if (std::find(ok.begin(), ok.end(), t) == ok.end()) {
    std::string names;
    for (DType d : ok) names += std::string(names.empty() ? "" : ", ") + dtype_name(d);
    return std::string(dtype_name(t)) + " is not supported by " + std::string(name()) +
           " (dtypes: " + names + ")";
  }
  if (auto why = check_params(params)) return why;
  try {
    check_problem(problem);
  } catch (const InvalidArgument& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::optional<std::string> needs_sm80_reason(const DeviceInfo& device) {
  if (device.cc_major <= 0 || device.cc_major >= 8) return std::nullopt;
  return "needs compute capability 8.0 or later (cp.async, bf16 mma.sync); the device is " +
         std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
}

std::vector<TensorSpec> word_aligned_side_tensors(std::vector<TensorSpec> specs, DType t) {
  for (TensorSpec& s : specs)
    if (s.dtype != t) s.alignment = 4;
  return specs;
}

std::vector<std::int64_t> offsets_of(const Fill& fill, std::int64_t count) {
  // Any fixed value; the tuner's seed must not change the sizes the op derives from these.
  constexpr unsigned long long kSeed = 0x6b74756e65ull;
  std::vector<std::int64_t> out(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)), 0);
  for (std::size_t i = 1; i < out.size(); ++i)
    out[i] = out[i - 1] + fill_int_value(kSeed, i - 1, fill.first_int, fill.last_int);
  return out;
}

Tolerance Op::tolerance(DType t) const {
  switch (t) {
    case DType::bf16: return {1.6e-2, 1e-2};
    case DType::f16: return {2e-3, 2e-3};
    case DType::f32: return {1e-5, 1e-5};
    case DType::i32: return {0.0, 0.0};  // indices and counts compare exactly
    // e4m3 inputs, bf16 outputs: the op's own rounding to e4m3 inside (attention's P) costs a
    // few percent; ops that take e4m3 set their own tolerance.
    case DType::e4m3: return {1e-1, 5e-2};
  }
  return {1e-5, 1e-5};
}

double Op::min_bytes(const Problem& p, DType t) const {
  double bytes = 0.0;
  for (const TensorSpec& s : tensors(p, t))
    bytes += static_cast<double>(s.elements) * static_cast<double>(dtype_size(s.dtype));
  return bytes;
}

}  // namespace ktune
