// The unit hooks' contract (models/core/unit_hooks.h), checked the way FSDP will rely on it: a
// released unit's parameters are poisoned with NaN (FSDP frees them), a gathered unit's are put
// back, and a unit's gradient must not change after grad_ready (FSDP reduce-scatters it then).
// If any model computed with a released unit or touched a finished gradient, the losses or
// gradients would differ from an unhooked run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "models/lm/language_model.h"
#include "tests/common/random.h"
#include "tests/common/tiny_models.h"

namespace amor::model {
namespace {

class PoisoningHooks final : public UnitHooks {
 public:
  explicit PoisoningHooks(ParamStore& ps) : ps_(ps) {
    for (auto& p : ps.params()) saved_[p.get()] = p->value.clone();
    for (auto& p : ps.params()) poison(p.get());
  }
  void gather(int unit) override {
    for (auto& p : ps_.params())
      if (p->unit == unit) p->value.copy_from(saved_[p.get()]);
    gathered_[unit] = true;
  }
  void release(int unit) override {
    for (auto& p : ps_.params())
      if (p->unit == unit) poison(p.get());
    gathered_[unit] = false;
  }
  void grad_ready(int unit) override {
    EXPECT_TRUE(gathered_[unit]) << "grad_ready of unit " << unit << " while released";
    ready_count_[unit]++;
    for (auto& p : ps_.params())
      if (p->unit == unit) final_grads_[p.get()] = p->grad.clone();
  }
  // After backward: every unit reported once, and no gradient changed after its report.
  void check_after_backward() {
    for (size_t u = 0; u < ps_.unit_names().size(); ++u)
      EXPECT_EQ(ready_count_[static_cast<int>(u)], 1) << "unit " << ps_.unit_names()[u];
    for (auto& [p, g] : final_grads_)
      for (int64_t i = 0; i < g.numel(); ++i)
        ASSERT_EQ(g.item(i), p->grad.item(i)) << p->name << " changed after grad_ready";
    ready_count_.clear();
  }

 private:
  static void poison(Param* p) {
    for (int64_t i = 0; i < p->value.numel(); ++i)
      p->value.set_item(i, std::numeric_limits<double>::quiet_NaN());
  }
  ParamStore& ps_;
  std::map<Param*, Tensor> saved_, final_grads_;
  std::map<int, bool> gathered_;
  std::map<int, int> ready_count_;
};

ModelConfig tiny(const std::string& kind) {
  ModelConfig c = testing::tiny_model(kind, /*d_model=*/8, /*n_layers=*/2, /*vocab=*/11);
  c.vocab_chunk = 4;
  c.oryx.schedule = "linear:2,attention:3";
  return c;
}

void check(const ModelConfig& cfg) {
  SCOPED_TRACE(cfg.kind + " " + cfg.amor.residual_mode);
  auto plain = build_model(cfg, DType::F64);
  auto hooked = build_model(cfg, DType::F64);
  plain->params().initialize(7);
  hooked->params().initialize(7);
  Batch batch{testing::randint({2, 6}, 1, cfg.vocab), testing::randint({2, 6}, 2, cfg.vocab)};
  Tensor w = testing::randn({2, 6}, 3);
  PoisoningHooks hooks(hooked->params());
  hooked->set_unit_hooks(&hooks);
  for (int step = 0; step < 2; ++step) {  // twice: the second forward starts from released units
    StepOutput a = plain->forward(batch, /*training=*/false);
    StepOutput b = hooked->forward(batch, /*training=*/false);
    plain->params().zero_grad();
    hooked->params().zero_grad();
    plain->backward(w);
    hooked->backward(w);
    hooks.check_after_backward();
    for (int64_t i = 0; i < a.token_loss.numel(); ++i)
      ASSERT_EQ(a.token_loss.item(i), b.token_loss.item(i));
    const auto& pp = plain->params().params();
    const auto& hp = hooked->params().params();
    for (size_t k = 0; k < pp.size(); ++k)
      for (int64_t i = 0; i < pp[k]->grad.numel(); ++i)
        ASSERT_EQ(pp[k]->grad.item(i), hp[k]->grad.item(i)) << pp[k]->name;
  }
}

TEST(UnitHooks, EveryModelKindUsesOnlyGatheredUnits) {
  // With activation recomputation the backward re-runs each layer's forward: it too must use
  // only gathered units.
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "no recompute");
    auto with = [&](ModelConfig c) {
      c.recompute = recompute;
      return c;
    };
    for (const char* kind : {"transformer", "mamba2", "gdn", "oryx", "fused"}) check(with(tiny(kind)));
    ModelConfig serial = tiny("serial");
    serial.pattern = "GA";
    check(with(serial));
    for (const char* mode : {"classic", "h"}) {
      ModelConfig amor = tiny("amor");
      amor.amor.residual_mode = mode;
      amor.init_std = 0.5;
      check(with(amor));
    }
  }
}

}  // namespace
}  // namespace amor::model
