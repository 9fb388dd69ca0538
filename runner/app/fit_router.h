// `amor-run fit-router`: fits the AMOR paper's entropy router (models/amor/entropy_router.h) to a
// finished AMOR run, with the model frozen:
//
//   amor-run fit-router RUN_DIR [--tokens N] [--steps S] [--width W] [--batch B] [--lr LR]
//                               [--holdout F] [--seed S] [--data RUN_CONFIG.json]
//
// RUN_DIR holds config.json and model.safetensors (what every run writes); the gates' EMA
// thresholds come from its newest checkpoint (checkpoints/step-N/fsdp.json's extra), else from
// the weights file's metadata, else model.amor.m_init / s_init (a warning says which). Tokens:
// the first N (default 32768) of the run's training stream (make_run_data, rank 0 of 1; --data: a
// run config whose data section replaces the run's), read by forward(training = false) in
// micro-batches of train.micro_batch sequences; each AMOR block's normed input hn and the
// normalised entropy its LM-head gate computed are collected. The last --holdout fraction
// (default 0.1) of the batches is held out. Per block: AdamW on the MSE (width 512, --steps 2000,
// --batch 256, --lr 1e-3), then on the held-out tokens: MSE, gate agreement (the fraction of
// tokens where 1[r(hn) > tau] equals the LM-head gate's decision), both fire rates; and once for
// the model: the held-out mean loss with the LM-head gates and with the router's gates (the
// score change the router costs). Note that blocks k >= 1 are fitted on the hn the LM-head gates
// produce; with the router the earlier gates may differ, and so their hn.
//
// Writes RUN_DIR/router.safetensors (atomically; the fit's JSON in its metadata "fit") and
// RUN_DIR/router_fit.json, and prints the per-block table. Evaluate with the router:
// eval.router=RUN_DIR/router.safetensors (runner/config/README.md).
// Exit status: 0 written, 1 failure (message on err), 2 usage error.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace amor {

bool is_fit_router(int argc, const char* const* argv);
// args: after "fit-router".
int fit_router_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace amor
