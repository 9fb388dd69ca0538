// Sharded checkpoints under mpirun at 1, 2 and 4 ranks: save at W = min(2, ranks), resume at the
// same W bit for bit (losses and parameters of the continued run), resume at every other W the
// job allows (1, 4) by resharding, within the f64 reduction-order tolerance of fsdp_mpi_test
// (1e-10); the caller's extra metadata round trip; and every broken checkpoint named clearly.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runner/dist/dist_test_support.h"

namespace amor::dist {
namespace {

using namespace testing;
namespace fs = std::filesystem;

constexpr int64_t kGlobal = 4, kT = 6;

// A folder every rank sees: rank 0 creates it and broadcasts the name; removed at the end.
class SharedTempDir {
 public:
  explicit SharedTempDir(Communicator& c) : c_(c) {
    std::string p;
    if (c.rank() == 0) {
      char tmpl[] = "/tmp/amor_fsdp_ckpt_XXXXXX";
      p = mkdtemp(tmpl) ? tmpl : "";
    }
    path_ = c.broadcast_string(p, 0);
    EXPECT_FALSE(path_.empty());
  }
  ~SharedTempDir() {
    c_.barrier();
    if (c_.rank() == 0) fs::remove_all(path_);
  }
  std::string sub(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  Communicator& c_;
  std::string path_;
};

// The first n ranks of the world as their own communicator (MPI_COMM_NULL on the others).
MPI_Comm first_ranks(int n) {
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < n ? 0 : MPI_UNDEFINED, world_rank(), &sub);
  return sub;
}

// AMOR's thresholds as exact text (hex floats), the way a runner keeps them in the extra metadata.
std::string gate_text(model::LanguageModel& m) {
  std::string s;
  if (auto* a = dynamic_cast<model::AmorModel*>(&m))
    for (const auto& g : a->gate_state()) s += fmt::format("{:a} {:a} ", g.m, g.s);
  return s;
}

void set_gate_text(model::LanguageModel& m, const std::string& s) {
  auto* a = dynamic_cast<model::AmorModel*>(&m);
  if (!a) return;
  std::vector<model::AmorGateState> st = a->gate_state();
  const char* p = s.c_str();
  for (auto& g : st) {
    char* end = nullptr;
    g.m = std::strtod(p, &end);
    g.s = std::strtod(end, &end);
    p = end;
  }
  a->set_gate_state(st);
}

struct Continuation {
  std::vector<double> losses;
  std::vector<std::pair<std::string, Tensor>> params;
};

Continuation continue_training(ShardedTrainer& t, const model::ModelConfig& cfg, int from, int steps) {
  Continuation c;
  for (int s = from; s < from + steps; ++s) c.losses.push_back(t.step({global_batch(cfg, kGlobal, kT, 1, s)}, 0.02).loss);
  c.params = t.fsdp().full_parameters();
  return c;
}

void check_resume(const model::ModelConfig& cfg) {
  SCOPED_TRACE(cfg.kind);
  MpiCommunicator world(MPI_COMM_WORLD);
  SharedTempDir tmp(world);
  const std::string dir = tmp.sub("step-2");
  const int Wa = std::min(2, world.size());
  Continuation uninterrupted;
  MPI_Comm save_comm = first_ranks(Wa);
  if (save_comm != MPI_COMM_NULL) {
    MpiCommunicator c(save_comm);
    ShardedTrainer a(cfg, DType::F64, 1, c);
    continue_training(a, cfg, 0, 2);
    a.fsdp().save(dir, 2, {{"data_position", "8"}, {"gates", gate_text(a.model())}});
    uninterrupted = continue_training(a, cfg, 2, 2);

    // Same W: a fresh model from another seed, loaded, continues bit for bit.
    ShardedTrainer b(cfg, DType::F64, 99, c);
    FsdpCheckpoint info = b.fsdp().load(dir);
    EXPECT_EQ(info.step, 2);
    EXPECT_EQ(info.world_size, Wa);
    EXPECT_EQ(info.extra["data_position"], "8");
    EXPECT_EQ(b.fsdp().optimizer_step(), 2);
    set_gate_text(b.model(), info.extra["gates"]);
    Continuation resumed = continue_training(b, cfg, 2, 2);
    EXPECT_EQ(resumed.losses, uninterrupted.losses);
    EXPECT_TRUE(bitwise_equal(resumed.params, uninterrupted.params));
    MPI_Comm_free(&save_comm);
  }
  if (world.rank() == 0) {
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".safetensors";
    EXPECT_EQ(files, Wa);
    EXPECT_TRUE(fs::exists(fs::path(dir) / "fsdp.json"));
  }
  // Every rank learns the uninterrupted run's results from rank 0 (a member of the saving group).
  std::vector<double> losses = uninterrupted.losses;
  losses.resize(2);
  world.broadcast(losses.data(), losses.size() * sizeof(double), 0);

  // Other world sizes reshard the same files.
  for (int Wb : {1, 2, 4}) {
    if (Wb == Wa || Wb > world.size()) continue;
    SCOPED_TRACE("resume at W=" + std::to_string(Wb));
    MPI_Comm comm = first_ranks(Wb);
    if (comm == MPI_COMM_NULL) continue;
    MpiCommunicator c(comm);
    ShardedTrainer t(cfg, DType::F64, 99, c);
    FsdpCheckpoint info = t.fsdp().load(dir);
    EXPECT_EQ(info.world_size, Wa);
    set_gate_text(t.model(), info.extra["gates"]);
    Continuation r = continue_training(t, cfg, 2, 2);
    for (size_t s = 0; s < losses.size(); ++s)
      EXPECT_LE(std::abs(r.losses[s] - losses[s]), 1e-10 * (1 + std::abs(losses[s]))) << "step " << s;
    // Parameters against the uninterrupted run, which rank 0 holds.
    if (c.rank() == 0 && !uninterrupted.params.empty()) {
      double worst = 0;
      for (size_t k = 0; k < r.params.size(); ++k)
        for (int64_t i = 0; i < r.params[k].second.numel(); ++i) {
          const double u = uninterrupted.params[k].second.item(i);
          worst = std::max(worst, std::abs(r.params[k].second.item(i) - u) / (1 + std::abs(u)));
        }
      EXPECT_LE(worst, 1e-10);
    }
    MPI_Comm_free(&comm);
  }
}

TEST(FsdpCheckpoint, ResumesBitwiseAtTheSameWorldSizeAndReshardsToOthers) {
  check_resume(tiny("transformer"));
  check_resume(tiny("amor"));
}

// Rank 0 edits the checkpoint's files; everyone waits for it.
template <class F>
void on_rank0(Communicator& c, F&& f) {
  if (c.rank() == 0) f();
  c.barrier();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FsdpCheckpoint, BrokenCheckpointsAreNamed) {
  MpiCommunicator c(MPI_COMM_WORLD);
  SharedTempDir tmp(c);
  const int W = c.size();
  model::ModelConfig cfg = tiny("transformer");
  ShardedTrainer t(cfg, DType::F64, 1, c);
  const std::string good = tmp.sub("good");
  t.fsdp().save(good, 5);
  auto copy_of_good = [&](const std::string& name) {
    const std::string d = tmp.sub(name);
    on_rank0(c, [&] { fs::copy(good, d, fs::copy_options::recursive); });
    return d;
  };
  const std::string meta = good + "/fsdp.json";

  std::string err = error_of([&] { t.fsdp().load(tmp.sub("nothing")); });
  EXPECT_NE(err.find("no fsdp.json (not a checkpoint, or its save was interrupted)"), std::string::npos) << err;

  // Another model's checkpoint: other parameters, or the same ones in other shapes.
  ShardedTrainer other(tiny("gdn"), DType::F64, 1, c);
  err = error_of([&] { other.fsdp().load(good); });
  EXPECT_NE(err.find("fsdp.json: units[1]: unit 'layers.0' has 9 parameters saved, the model has 18"),
            std::string::npos)
      << err;
  model::ModelConfig wider = cfg;
  wider.d_ff = 16;
  ShardedTrainer reshaped(wider, DType::F64, 1, c);
  err = error_of([&] { reshaped.fsdp().load(good); });
  EXPECT_NE(err.find("units[1]: parameter 'layers.0.mlp.gate_proj.weight' [12,8] saved where the model has "
                     "'layers.0.mlp.gate_proj.weight' [16,8]"),
            std::string::npos)
      << err;

  // Another dtype.
  ShardedTrainer f32(cfg, DType::F32, 1, c);
  err = error_of([&] { f32.fsdp().load(good); });
  EXPECT_NE(err.find("fsdp.json: the checkpoint holds f64 weights but the model is f32"), std::string::npos) << err;

  // A foreign fsdp.json.
  const std::string foreign = copy_of_good("foreign");
  on_rank0(c, [&] { write_text(foreign + "/fsdp.json", "{\"format\": \"something-else\"}"); });
  err = error_of([&] { t.fsdp().load(foreign); });
  EXPECT_NE(err.find("fsdp.json: format is 'something-else', expected 'amor-fsdp-checkpoint'"), std::string::npos)
      << err;

  // A missing shard file (with several ranks, only the rank that needs it fails; all are told).
  const std::string missing = copy_of_good("missing");
  const std::string last = fmt::format("rank-{:05d}-of-{:05d}.safetensors", W - 1, W);
  on_rank0(c, [&] { fs::remove(missing + "/" + last); });
  err = error_of([&] { t.fsdp().load(missing); });
  EXPECT_NE(err.find("missing shard file " + missing + "/" + last), std::string::npos) << err;
  if (W > 1 && c.rank() == 0) {
    EXPECT_NE(err.find(fmt::format("fsdp checkpoint load: rank {} failed:", W - 1)), std::string::npos) << err;
  }

  // A shard from another save mixed in.
  const std::string later = tmp.sub("later");
  t.fsdp().save(later, 6);
  const std::string mixed = copy_of_good("mixed");
  on_rank0(c, [&] { fs::copy_file(later + "/" + last, mixed + "/" + last, fs::copy_options::overwrite_existing); });
  err = error_of([&] { t.fsdp().load(mixed); });
  EXPECT_NE(err.find("shard of step 6 but fsdp.json is step 5 (files of two saves mixed)"), std::string::npos) << err;

  // A layout edited to disagree with the model.
  const std::string edited = copy_of_good("edited");
  on_rank0(c, [&] {
    std::string j = read_text(meta);
    j.replace(j.find("\"name\":\"embed\""), 14, "\"name\":\"embex\"");
    write_text(edited + "/fsdp.json", j);
  });
  err = error_of([&] { t.fsdp().load(edited); });
  EXPECT_NE(err.find("units[0]: unit 'embex' where the model has unit 'embed'"), std::string::npos) << err;

  // Nowhere to write.
  const std::string file = tmp.sub("a_file");
  on_rank0(c, [&] { write_text(file, "x"); });
  err = error_of([&] { t.fsdp().save(file + "/ckpt", 1); });
  EXPECT_NE(err.find("fsdp checkpoint: cannot create directory '" + file + "/ckpt'"), std::string::npos) << err;

  // After all that the good checkpoint still loads and the model still trains.
  EXPECT_EQ(t.fsdp().load(good).step, 5);
  EXPECT_TRUE(std::isfinite(t.step({global_batch(cfg, kGlobal, kT, 1, 0)}, 0.02).loss));
}

}  // namespace
}  // namespace amor::dist

int main(int argc, char** argv) { return amor::dist::testing::mpi_gtest_main(argc, argv); }
