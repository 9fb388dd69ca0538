// The run identities of the sweeps in experiments/: every run's name and hash, as they were
// before the config keys were declared once in their structs (issue #17 §1), and the whole
// canonical text of one run. A change to a key's name, default, type or text form changes these
// and the folders of existing results with them: such a change must be deliberate (update the
// pins and say so), never a side effect. Changed on purpose since: the amor, mamba2 and gdn runs at
// AMOR's sizes (issue #15 §1: those presets take the AMOR authors' norm epsilons and init); the
// run NAMES (not the hashes) of all three files (issue #16 §4: a swept key the run's model does
// not read, such as model.amor.backbone beside a transformer, no longer names the run).
#include <gtest/gtest.h>

#include <map>

#include "runner/app/preset_resolve.h"
#include "runner/config/sweep.h"

namespace amor {
namespace {

std::vector<config::RunSpec> expand(const std::string& file) {
  config::ExpandOptions eo;
  eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) {
    apply_model_preset(cfg, set_at);
  };
  return config::expand_sweep({std::string(AMOR_SOURCE_DIR) + "/" + file}, {}, eo);
}

TEST(ExperimentHashes, EveryRunKeepsItsNameAndHash) {
  const std::map<std::string, std::vector<std::string>> pinned = {
      {"experiments/amor-table.yaml",
       {"preset_mamba2-180m-da002cdb",
        "preset_serial-180m-pattern_MMMMMA-15c93f66",
        "preset_fused-180m-mamba2-b4427345",
        "preset_amor-180m-mamba2-2ff26220",
        "preset_gdn-180m-3b962d77",
        "preset_serial-180m-pattern_GGGGGA-487454c9",
        "preset_fused-180m-gdn-386f758b",
        "preset_amor-180m-gdn-c8ec5893",
        "preset_mamba2-440m-f0338d2a",
        "preset_serial-440m-pattern_MMMMMA-b6a58a28",
        "preset_fused-440m-mamba2-b69cfe76",
        "preset_amor-440m-mamba2-6be34fa2",
        "preset_gdn-440m-655690f2",
        "preset_serial-440m-pattern_GGGGGA-0e10e7f6",
        "preset_fused-440m-gdn-2d981930",
        "preset_amor-440m-gdn-76ff210c",
        "preset_mamba2-1.5b-538cd5b0",
        "preset_serial-1.5b-pattern_MMMMMA-67e32b0a",
        "preset_fused-1.5b-mamba2-1faf634b",
        "preset_amor-1.5b-mamba2-e11a5a89",
        "preset_gdn-1.5b-8c6ef77e",
        "preset_serial-1.5b-pattern_GGGGGA-f75a0452",
        "preset_fused-1.5b-gdn-f3e23bc0",
        "preset_amor-1.5b-gdn-caabb167"}},
      {"experiments/oryx-table.yaml",
       {"preset_transformer-130m-d9cf2708",
        "preset_mamba2-130m-86250da2",
        "preset_gdn-130m-8629ef32",
        "preset_oryx-130m-mamba2-d431db0d",
        "preset_oryx-130m-gdn-83aac2b4",
        "preset_transformer-370m-15ad0924",
        "preset_mamba2-370m-87df4081",
        "preset_gdn-370m-cc94efd0",
        "preset_oryx-370m-mamba2-9afcc779",
        "preset_oryx-370m-gdn-2f51030c",
        "preset_transformer-780m-1a98fe9c",
        "preset_mamba2-780m-e3e32eb5",
        "preset_gdn-780m-c3522c62",
        "preset_oryx-780m-mamba2-0a54f169",
        "preset_oryx-780m-gdn-b1a177e1",
        "preset_transformer-1.4b-9c884ede",
        "preset_mamba2-1.4b-2fccde5b",
        "preset_gdn-1.4b-d517fd4d",
        "preset_oryx-1.4b-mamba2-2294c377",
        "preset_oryx-1.4b-gdn-9de4a572"}},
      {"experiments/quickstart.yaml",
       {"mqar-transformer-f22e530c",
        "mqar-mamba2-cc761bab",
        "mqar-gdn-3d09c228",
        "mqar-amor-gdn-35198310",
        "mqar-amor-mamba2-8b25b153",
        "corpus-transformer-b5cf4b49",
        "corpus-mamba2-7d7db910",
        "corpus-gdn-0666361f",
        "corpus-amor-gdn-96c505d8",
        "corpus-amor-mamba2-f2a55549"}},
  };
  for (const auto& [file, ids] : pinned) {
    std::vector<std::string> got;
    for (const config::RunSpec& r : expand(file)) got.push_back(r.id());
    EXPECT_EQ(got, ids) << file;
  }
}

// The variants form of amor-table.yaml (issue #16 §4): the same runs under the same names, each
// setting only the keys its model reads, hence other hashes (amor-table.yaml's zip also set the
// keys a model ignores, and the hash is of the whole config). Pinned like the others.
TEST(ExperimentHashes, AmorTableVariantsNamesTheSameRuns) {
  const std::vector<config::RunSpec> zip = expand("experiments/amor-table.yaml");
  const std::vector<config::RunSpec> var = expand("experiments/amor-table-variants.yaml");
  ASSERT_EQ(zip.size(), var.size());
  std::vector<std::string> hashes;
  for (size_t i = 0; i < zip.size(); ++i) {
    EXPECT_EQ(zip[i].name, var[i].name) << i;
    EXPECT_EQ(zip[i].config.model.kind, var[i].config.model.kind) << i;
    EXPECT_EQ(zip[i].config.model.d_model, var[i].config.model.d_model) << i;
    hashes.push_back(var[i].hash8);
  }
  EXPECT_EQ(hashes, (std::vector<std::string>{
                        "5dd83a24", "163bd3e3", "b769f5b0", "e5779a29", "c3d85d79", "540a10d0",
                        "3d2ecfd8", "475e71a7", "0bed3ae5", "b01bbf54", "cee37220", "45d0008f",
                        "669930fc", "2bcfe75d", "99cee0e7", "9b03bf24", "41e750e8", "c25a8505",
                        "b1d03faf", "6f1da419", "a992d5b6", "6f199e78", "aafa1731", "0c0ede0d"}));
}

TEST(ExperimentHashes, CanonicalTextOfOneRun) {
  const std::vector<config::RunSpec> runs = expand("experiments/quickstart.yaml");
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs[0].id(), "mqar-transformer-f22e530c");
  EXPECT_EQ(runs[0].canonical,
            "{\n"
            "  \"checkpoint\": {\n"
            "    \"every\": 100,\n"
            "    \"keep\": 2,\n"
            "    \"signal\": \"SIGUSR1\"\n"
            "  },\n"
            "  \"data\": {\n"
            "    \"mqar\": {\n"
            "      \"num_kv_pairs\": 4,\n"
            "      \"num_train\": 2000,\n"
            "      \"num_valid\": 128,\n"
            "      \"power_a\": 0.01\n"
            "    },\n"
            "    \"path\": \"\",\n"
            "    \"seq_len\": 64,\n"
            "    \"source\": \"mqar\",\n"
            "    \"tokenizer\": \"byte\"\n"
            "  },\n"
            "  \"device\": \"cpu\",\n"
            "  \"eval\": {\n"
            "    \"arc_challenge\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    },\n"
            "    \"arc_easy\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    },\n"
            "    \"batch_size\": 8,\n"
            "    \"checkpoint\": \"\",\n"
            "    \"hellaswag\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    },\n"
            "    \"lambada\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    },\n"
            "    \"longbench\": {\n"
            "      \"dir\": \"\",\n"
            "      \"limit\": 0\n"
            "    },\n"
            "    \"max_examples\": 0,\n"
            "    \"max_length\": 2048,\n"
            "    \"mqar\": {\n"
            "      \"examples\": 64,\n"
            "      \"kv_pairs\": 0,\n"
            "      \"seq_len\": 0,\n"
            "      \"vocab_size\": 0\n"
            "    },\n"
            "    \"niah\": {\n"
            "      \"depths\": [\n"
            "        0.0,\n"
            "        50.0,\n"
            "        100.0\n"
            "      ],\n"
            "      \"essay_path\": \"\",\n"
            "      \"lengths\": [\n"
            "        512\n"
            "      ],\n"
            "      \"samples_per_cell\": 1\n"
            "    },\n"
            "    \"oryx_switch\": {\n"
            "      \"after\": \"attention\",\n"
            "      \"before\": \"linear\",\n"
            "      \"num_sequences\": 8,\n"
            "      \"path\": \"\",\n"
            "      \"seq_len\": 0,\n"
            "      \"switch_at\": 0,\n"
            "      \"window\": 0\n"
            "    },\n"
            "    \"piqa\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    },\n"
            "    \"ppl_by_position\": {\n"
            "      \"bucket_size\": 0,\n"
            "      \"num_sequences\": 4,\n"
            "      \"path\": \"\",\n"
            "      \"seq_len\": 0\n"
            "    },\n"
            "    \"seed\": 42,\n"
            "    \"tasks\": [\n"
            "      \"mqar\",\n"
            "      \"niah_single_1\",\n"
            "      \"passkey\",\n"
            "      \"ppl_by_position\"\n"
            "    ],\n"
            "    \"tokens_per_task\": 16,\n"
            "    \"weights\": \"\",\n"
            "    \"winogrande\": {\n"
            "      \"limit\": 0,\n"
            "      \"path\": \"\"\n"
            "    }\n"
            "  },\n"
            "  \"model\": {\n"
            "    \"amor\": {\n"
            "      \"backbone\": \"gdn\",\n"
            "      \"blocks\": 1,\n"
            "      \"fixed_offset\": 0.03,\n"
            "      \"kappa\": 0.2,\n"
            "      \"m_init\": 0.3,\n"
            "      \"momentum\": 0.9,\n"
            "      \"offset_mode\": \"adaptive\",\n"
            "      \"residual_mode\": \"classic\",\n"
            "      \"s_init\": 0.1\n"
            "    },\n"
            "    \"d_ff\": 128,\n"
            "    \"d_model\": 64,\n"
            "    \"fused_linear\": \"mamba2\",\n"
            "    \"gdn\": {\n"
            "      \"a_max\": 16.0,\n"
            "      \"a_min\": 0.0,\n"
            "      \"chunk\": 32,\n"
            "      \"conv_kernel\": 4,\n"
            "      \"dt_floor\": 0.0001,\n"
            "      \"dt_max\": 0.1,\n"
            "      \"dt_min\": 0.001,\n"
            "      \"head_dim\": 16,\n"
            "      \"norm_eps\": 1e-05,\n"
            "      \"qk_ratio\": 0.75,\n"
            "      \"v_expand\": 2.0\n"
            "    },\n"
            "    \"head_dim\": 16,\n"
            "    \"init_std\": 0.02,\n"
            "    \"kind\": \"transformer\",\n"
            "    \"mamba2\": {\n"
            "      \"a_max\": 16.0,\n"
            "      \"a_min\": 1.0,\n"
            "      \"chunk\": 32,\n"
            "      \"conv_kernel\": 4,\n"
            "      \"d_state\": 16,\n"
            "      \"dt_floor\": 0.0001,\n"
            "      \"dt_max\": 0.1,\n"
            "      \"dt_min\": 0.001,\n"
            "      \"expand\": 2,\n"
            "      \"head_dim\": 16,\n"
            "      \"n_groups\": 1\n"
            "    },\n"
            "    \"n_kv_heads\": 0,\n"
            "    \"n_layers\": 2,\n"
            "    \"norm_eps\": 1e-05,\n"
            "    \"oryx\": {\n"
            "      \"chunk\": 128,\n"
            "      \"linear\": \"gdn\",\n"
            "      \"p_attention\": 0.5,\n"
            "      \"schedule\": \"attention\"\n"
            "    },\n"
            "    \"pattern\": \"\",\n"
            "    \"preset\": \"\",\n"
            "    \"recompute\": false,\n"
            "    \"rope_base\": 10000.0,\n"
            "    \"vocab\": 260,\n"
            "    \"vocab_chunk\": 8192\n"
            "  },\n"
            "  \"parallel\": {\n"
            "    \"ranks_per_run\": 1\n"
            "  },\n"
            "  \"train\": {\n"
            "    \"beta1\": 0.9,\n"
            "    \"beta2\": 0.95,\n"
            "    \"clip\": 1.0,\n"
            "    \"dtype\": \"f32\",\n"
            "    \"eps\": 1e-08,\n"
            "    \"eval_every\": 0,\n"
            "    \"grad_accum\": 1,\n"
            "    \"log_every\": 50,\n"
            "    \"lr\": 0.003,\n"
            "    \"micro_batch\": 8,\n"
            "    \"min_lr_ratio\": 0.1,\n"
            "    \"seed\": 0,\n"
            "    \"steps\": 250,\n"
            "    \"warmup_steps\": 5,\n"
            "    \"weight_decay\": 0.1\n"
            "  }\n"
            "}\n");
}

}  // namespace
}  // namespace amor
