#include <string>

#include "ktune/error.hpp"
#include "templates/attention/attention_op.hpp"
#include "templates/decode/decode_op.hpp"
#include "templates/fused/fused_ops.hpp"
#include "templates/moe/moe_op.hpp"
#include "templates/op.hpp"

namespace ktune {

const std::vector<const Op*>& all_ops() {
  static const std::vector<const Op*> ops = [] {
    std::vector<const Op*> all = fused_ops();
    all.push_back(&flash_attention_op());
    all.push_back(&flash_decode_op());
    all.push_back(&moe_op());
    return all;
  }();
  return ops;
}

const Op* find_op(std::string_view name) {
  for (const Op* op : all_ops())
    if (op->name() == name) return op;
  return nullptr;
}

const Op& get_op(std::string_view name) {
  if (const Op* op = find_op(name)) return *op;
  std::string known;
  for (const Op* op : all_ops()) {
    if (!known.empty()) known += ", ";
    known += op->name();
  }
  throw InvalidArgument("unknown op \"" + std::string(name) + "\" (known ops: " + known + ")");
}

}  // namespace ktune
