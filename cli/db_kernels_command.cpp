// `ktune db kernels`: the kernels each configuration of a database compiles to (header and NVRTC
// name expression, from the ops of this build) and the target it was tuned for. With two source
// trees, scripts/same_machine_code.py compiles these and compares the machine code, so that rows
// whose code did not change can be re-hashed instead of re-tuned (db/shipped/README.md).
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/cli.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "db/store.hpp"
#include "ktune/error.hpp"
#include "templates/op.hpp"

namespace po = boost::program_options;

namespace ktune::cli {
namespace {

/// One configuration of the database: its key, the target it ran on, the template hash it was
/// measured with.
struct Config {
  std::string op, problem, params, arch, template_hash;
  DType dtype = DType::bf16;
  auto key() const { return std::tie(op, dtype, problem, params, arch, template_hash); }
  bool operator<(const Config& o) const { return key() < o.key(); }
};

}  // namespace

int cmd_db_kernels(const Args& args) {
  po::options_description desc("db kernels options");
  desc.add_options()("op", po::value<std::string>()->default_value(""), "only this op")
      ("db", po::value<std::string>(), "database")("json", "print JSON");
  po::variables_map vm;
  if (!parse_options("db kernels", "[--op OP] [--db PATH] [--json]", desc, args, vm)) return 0;
  const std::string op_filter = vm["op"].as<std::string>();
  if (!op_filter.empty()) op_option(op_filter);
  const DbLocation db = db_option(vm);
  if (!db_exists(db)) throw InvalidArgument("database " + db.describe() + " does not exist");
  const Store store = Store::open(db.path, Store::Mode::read_only);

  // The configurations of the best rows and of the trials that ran (ok): a shipped database's
  // defaults' trials decide whether a row serves its neighbours, so their code counts too.
  std::map<std::string, std::string> arch_of;  // device key -> arch
  for (const DeviceInfo& d : store.devices().rows) arch_of[d.key()] = d.arch();
  std::set<Config> configs;
  std::size_t skipped = 0;
  const Rows<BestRecord> bests = store.all_bests(op_filter);
  for (const BestRecord& b : bests.rows)
    configs.insert({b.op, b.problem_key, b.params_key, b.arch, b.template_hash, b.dtype});
  const Rows<TrialRecord> trials = store.all_trials(op_filter);
  for (const TrialRecord& t : trials.rows) {
    if (t.status != TrialStatus::ok) continue;
    auto it = arch_of.find(t.device_key);
    if (it == arch_of.end()) {
      ++skipped;
      continue;
    }
    configs.insert({t.op, t.problem_key, t.params_key, it->second, t.template_hash, t.dtype});
  }
  skipped += bests.skipped.size() + trials.skipped.size();

  const bool json = vm.count("json") > 0;
  Json j;
  if (json) j.begin_object().key("configurations").begin_array();
  for (const Config& c : configs) {
    const Op* op = find_op(c.op);
    std::vector<KernelSource> kernels;
    std::string why;
    if (!op) {
      why = "unknown op";
    } else {
      try {
        kernels = op->kernels(op->parse_params(c.params), op->parse_problem(c.problem), c.dtype);
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (!why.empty()) {
      ++skipped;
      std::fprintf(stderr, "ktune db kernels: warning: %s %s %s %s skipped: %s\n", c.op.c_str(),
                   dtype_name(c.dtype), shown(c.problem).c_str(), shown(c.params).c_str(),
                   shown(why, 300).c_str());
      continue;
    }
    const std::string current = op->template_hash();
    if (json) {
      j.begin_object().field("op", c.op).field("dtype", dtype_name(c.dtype));
      j.field("problem", c.problem).field("params", c.params).field("arch", c.arch);
      j.field("template_hash", c.template_hash).field("current_hash", current);
      j.key("kernels").begin_array();
      for (const KernelSource& k : kernels)
        j.begin_object().field("file", k.file).field("name", k.name_expression).end_object();
      j.end_array().end_object();
    } else {
      for (const KernelSource& k : kernels)
        std::printf("%s %s %s %s %s%s: %s %s\n", c.op.c_str(), dtype_name(c.dtype),
                    c.problem.c_str(), c.params.c_str(), c.arch.c_str(),
                    c.template_hash == current ? "" : " (stale)", k.file.c_str(),
                    k.name_expression.c_str());
    }
  }
  if (json) {
    // Rows not listed: a re-hash must not treat their op as compared.
    j.end_array().field("skipped", static_cast<long long>(skipped)).end_object();
    std::printf("%s\n", j.str().c_str());
  }
  if (skipped)
    std::fprintf(stderr, "ktune db kernels: warning: %zu rows skipped (ktune db check lists the "
                         "unreadable ones)\n", skipped);
  return 0;
}

}  // namespace ktune::cli
