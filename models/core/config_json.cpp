#include "models/core/config_json.h"

namespace amor::model {
namespace {

// Writes one struct's keys in the order its declare_keys lists them.
template <class S>
struct JsonWriter {
  const S& c;
  json::Object out;

  template <class B, class T>
  void key(std::string_view name, T B::*m, const keys::Allowed&, std::string_view) {
    out.emplace_back(std::string(name), json::Value(c.*m));
  }
  template <class B, class Sub>
  void section(std::string_view name, Sub B::*m) {
    JsonWriter<Sub> w{c.*m, {}};
    keys::visit_keys<Sub>(w);
    out.emplace_back(std::string(name), json::Value(std::move(w.out)));
  }
};

}  // namespace

json::Value to_json(const ModelConfig& c) {
  JsonWriter<ModelConfig> w{c, {}};
  keys::visit_keys<ModelConfig>(w);
  return json::Value(std::move(w.out));
}

}  // namespace amor::model
