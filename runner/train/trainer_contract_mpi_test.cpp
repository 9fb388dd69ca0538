// A model kind the runner has never seen goes through the whole Trainer (sharding, run.h5,
// checkpoints, resume, evaluation, final weights) on 1, 2 and 4 ranks, only through the run
// contract (models/lm/run_contract.h): its own /train columns and summary metric land in run.h5,
// its collective (a gather over the run group) sees every rank's values, and its checkpoint state
// survives a resume exactly. Nothing in runner/ knows this kind.
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/json/json.h"
#include "runner/dist/dist_test_support.h"
#include "runner/output/hdf5_util.h"
#include "runner/train/trainer.h"

namespace amor {
namespace {

using dist::testing::world_rank;
using dist::testing::world_size;
namespace fs = std::filesystem;

// An identity body between the tied embedding and LM head. In each training forward it gathers
// the entropies of the whole run's micro-batch from its run group and folds their mean into an
// EMA: model state that belongs in checkpoints, the same on every rank only if the gather works.
class ProbeModel final : public model::LanguageModel {
 public:
  // final_ema: where the EMA is left when the trainer destroys the model (train_run owns it, so
  // the test must not read the model after train_run returns).
  ProbeModel(const model::ModelConfig& cfg, DType dtype, double* final_ema)
      : LanguageModel(cfg, dtype), final_ema_(final_ema) {}
  ~ProbeModel() override { *final_ema_ = ema_; }

  std::vector<model::MetricColumn> metric_columns() const override {
    return {{"probe_tokens", {}}, {"probe_state", {2}}};
  }
  std::unique_ptr<model::StepMetrics> new_step_metrics() const override;
  std::vector<model::SummaryMetric> summary_metrics() const override { return {{"probe_tokens", "probe"}}; }
  std::map<std::string, std::string> checkpoint_state() const override {
    return {{"probe_ema", fmt::format("{:a}", ema_)}};
  }
  void restore_checkpoint_state(const std::map<std::string, std::string>& saved, bool required) override {
    auto it = saved.find("probe_ema");
    if (it == saved.end()) {
      EXPECT_FALSE(required);
      return;
    }
    ema_ = std::strtod(it->second.c_str(), nullptr);
  }
  void set_run_group(model::RunGroup* group) override { group_ = group; }
  double ema() const { return ema_; }
  int group_size() const { return group_ ? group_->size() : 1; }

 protected:
  Tensor body_forward(const Tensor& h, const model::Batch&, bool training, model::StepOutput&) override {
    training_ = training;
    return h;
  }
  Tensor body_backward(const Tensor& dh) override { return dh; }
  void forward_done(model::StepOutput& out) override {
    if (!training_) return;
    const Tensor all = group_ ? group_->gather_flat(out.entropy) : out.entropy.view({out.entropy.numel()});
    EXPECT_EQ(all.numel(), out.entropy.numel() * group_size());
    double sum = 0;
    for (int64_t i = 0; i < all.numel(); ++i) sum += all.item(i);
    ema_ = 0.5 * ema_ + 0.5 * sum / static_cast<double>(all.numel());
  }

 private:
  model::RunGroup* group_ = nullptr;
  bool training_ = false;
  double ema_ = 0;
  double* final_ema_;
};

// Tokens the forwards saw, summed over micro-batches and ranks; the EMA and the group size.
class ProbeMetrics final : public model::StepMetrics {
 public:
  explicit ProbeMetrics(const ProbeModel& m) : m_(m) {}
  void add(const model::StepOutput& out) override { tokens_ += static_cast<double>(out.token_loss.numel()); }
  model::MetricRow finish(model::RunGroup& group) override {
    std::vector<double> v{tokens_};
    group.sum(v);
    return {{"probe_tokens", {v[0]}}, {"probe_state", {m_.ema(), static_cast<double>(group.size())}}};
  }

 private:
  const ProbeModel& m_;
  double tokens_ = 0;
};

std::unique_ptr<model::StepMetrics> ProbeModel::new_step_metrics() const { return std::make_unique<ProbeMetrics>(*this); }

constexpr int64_t kSteps = 4, kMicro = 2, kAccum = 2, kT = 32;

config::RunSpec probe_spec() {
  config::RunSpec s;
  s.sweep = "probe";
  s.name = "probe";
  s.hash8 = "0badc0de";
  config::RunConfig& c = s.config;
  c.model.kind = "transformer";  // never read: the builder below makes the model
  c.model.vocab = 260;
  c.model.d_model = 16;
  c.data.source = "mqar";
  c.data.seq_len = kT;
  c.data.mqar.num_kv_pairs = 2;
  c.data.mqar.num_train = 64;
  c.data.mqar.num_valid = 16;
  c.train.steps = kSteps;
  c.train.micro_batch = kMicro;
  c.train.grad_accum = kAccum;
  c.train.warmup_steps = 1;
  c.train.log_every = 1;
  c.checkpoint.every = 2;
  c.checkpoint.keep = 5;
  return s;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string checkpoint_extra(const fs::path& run, int64_t step, const std::string& key) {
  const json::Value doc = json::parse(read_text(run / "checkpoints" / fmt::format("step-{:08d}", step) / "fsdp.json"));
  return doc.at("extra").at(key).as_string();
}

// /train/<name> as doubles, row-major.
std::vector<double> train_column(const fs::path& run, const std::string& name) {
  h5::Handle f(H5Fopen((run / "run.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  EXPECT_TRUE(f.valid());
  h5::Handle ds = h5::open_dataset(f.get(), "train/" + name);
  size_t n = 1;
  for (hsize_t d : h5::extent(ds.get())) n *= d;
  std::vector<double> v(n);
  if (n) EXPECT_GE(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  return v;
}

TEST(TrainerContract, AnUnknownModelKindTrainsChecksAndResumesThroughTheContract) {
  dist::MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = world_size();
  std::string root = world_rank() == 0 ? (fs::temp_directory_path() / fmt::format("amor_probe_{}", ::getpid())).string() : "";
  root = comm.broadcast_string(root, 0);
  const fs::path a = fs::path(root) / "a", b = fs::path(root) / "b";
  if (world_rank() == 0) fs::create_directories(a);
  comm.barrier();

  const config::RunSpec spec = probe_spec();
  // Each built model's EMA as the trainer left it (the run's model first, then any replicas);
  // a deque keeps the slots where they are as it grows.
  std::deque<double> built;
  TrainerOptions opt;
  opt.run_dir = a;
  opt.quiet = true;
  opt.build_model = [&](const model::ModelConfig& cfg, DType dtype) {
    built.push_back(-1.0);
    return std::make_unique<ProbeModel>(cfg, dtype, &built.back());
  };
  RunResult full = train_run(spec, comm, opt);
  ASSERT_EQ(full.status, TrainStatus::Done) << full.message;
  const double tokens_per_step = static_cast<double>(W * kMicro * kAccum * kT);
  EXPECT_EQ(full.metrics.count("valid_probe_tokens"), 1u);
  EXPECT_EQ(full.metrics.at("probe_tokens"), full.metrics.at("valid_probe_tokens"));
  EXPECT_GT(full.metrics.at("probe_tokens"), 0);

  if (world_rank() == 0) {
    // Only the model's own columns after the runner's: no gate columns for a model without gates.
    h5::Handle f(H5Fopen((a / "run.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    ASSERT_TRUE(f.valid());
    EXPECT_EQ(H5Lexists(f.get(), "train/fire_rate", H5P_DEFAULT), 0);
    EXPECT_GT(H5Lexists(f.get(), "train/probe_tokens", H5P_DEFAULT), 0);
    h5::Handle valid = h5::open_group(f.get(), "eval/valid");
    EXPECT_EQ(h5::read_double_attr(valid.get(), "probe_tokens"), full.metrics.at("valid_probe_tokens"));
    EXPECT_EQ(train_column(a, "probe_tokens"), std::vector<double>(kSteps, tokens_per_step));
    const std::vector<double> state = train_column(a, "probe_state");
    ASSERT_EQ(state.size(), 2u * kSteps);
    for (int64_t s = 0; s < kSteps; ++s) EXPECT_EQ(state[2 * s + 1], W) << "the metrics' group is the run's";
    EXPECT_GT(state[2 * (kSteps - 1)], 0);
    // The checkpoint keeps the model's state beside the runner's own metadata.
    EXPECT_EQ(checkpoint_extra(a, kSteps, "probe_ema"), fmt::format("{:a}", state[2 * (kSteps - 1)]));
    EXPECT_EQ(checkpoint_extra(a, 2, "probe_ema"), fmt::format("{:a}", state[2]));
    // Resume from step 2 in a copy: the same EMA afterwards only if it was restored.
    fs::copy(a, b, fs::copy_options::recursive);
    fs::remove_all(b / "checkpoints" / fmt::format("step-{:08d}", kSteps));
    fs::remove(b / "model.safetensors");
  }
  // Every rank gathered the same entropies, so every rank holds the same EMA.
  ASSERT_FALSE(built.empty());
  const double mine = built.front();
  double lo = mine, hi = mine;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi);
  comm.barrier();

  built.clear();
  opt.run_dir = b;
  RunResult resumed = train_run(spec, comm, opt);
  ASSERT_EQ(resumed.status, TrainStatus::Done) << resumed.message;
  EXPECT_EQ(built.front(), mine);
  if (world_rank() == 0) {
    EXPECT_EQ(checkpoint_extra(b, kSteps, "probe_ema"), checkpoint_extra(a, kSteps, "probe_ema"));
    EXPECT_EQ(train_column(b, "probe_state"), train_column(a, "probe_state"));
    EXPECT_EQ(train_column(b, "loss"), train_column(a, "loss"));
    EXPECT_TRUE(fs::exists(b / "model.safetensors"));
  }
  comm.barrier();
  if (world_rank() == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace amor

int main(int argc, char** argv) { return amor::dist::testing::mpi_gtest_main(argc, argv); }
