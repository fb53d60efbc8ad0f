#include "workloads/models/model_kind.hpp"

namespace stepsim {

const ModelKind& model_kind(const ModelSpec& m)
{
  return *ModelKindRegistry::get(m.architecture, "model.architecture");
}

void read_model(JsonReader& r, ModelSpec& m, const std::string& base_dir)
{
  m.architecture = r.text("architecture", std::string("transformer"), ModelKindRegistry::names());
  // An unknown architecture is reported above; the transformer's fields are still read, so that
  // their own problems are reported in the same pass.
  const auto* kind = ModelKindRegistry::find(m.architecture);
  (kind != nullptr ? **kind : *ModelKindRegistry::get("transformer", "model.architecture")).read(r, m, base_dir);
}

ModelHooks model_hooks()
{
  ModelHooks hooks;
  hooks.read        = read_model;
  hooks.layer_count = [](const ModelSpec& m) { return model_kind(m).layer_count(m); };
  hooks.check       = [](const Scenario& s, Problems& problems) { model_kind(s.model).check(s, problems); };
  return hooks;
}

} // namespace stepsim
