// `amor-run bench-decode`: inference speed of every run's model in a sweep (issue #18): chunked
// prefill of a random context, then greedy decode steps, at each batch size and context length.
//
//   amor-run bench-decode SWEEP.yaml [--batch 1,64] [--context 1024,4096,...] [--steps N]
//                         [--prefill-chunk N] [--fire-rate 0.22[,...]] [--device cuda|cpu]
//                         [--dtype bf16|f32] [--graphs] [--amor-form sparse,dense]
//                         [--gate lm-head,router] [--out FILE.csv] [key=value ...]
//
// Each run of the sweep (expanded as amor-run does, presets resolved, key=value overrides applied;
// experiments/bench-decode.yaml) gives one model, built with random weights (drawn from its
// config's init, one stream per parameter on every core: speed does not depend on the values)
// in --dtype (bf16 by default on the GPU, f32 on the CPU) on --device (cuda where a GPU exists).
// Per batch B and context C (ascending):
//   prefill  InferenceSession::prefill over C random tokens per sequence, in calls of
//            --prefill-chunk tokens (4096; the caches and states carry across calls, and no call
//            holds more than [B, chunk, V] logits), timed between device synchronisations;
//   decode   --steps (32) steps after two untimed ones, each a random token per sequence (made
//            before the clock starts; every step still computes its greedy prediction): ms per
//            step (per-token latency) and B / that (tokens/s). Random, not the model's own
//            greedy tokens: a random model's greedy tokens fall into a loop of one entropy value,
//            which would leave AMOR's gates all on or all off.
//   graphs   with --graphs, the same session then runs two untimed steps with CUDA graphs (the
//            capture, then a replay; models/infer/decode_graph.h) and the same --steps steps
//            replayed: graph_ms and graph_tok_s. Kinds that cannot be captured (Oryx, AMOR in
//            its sparse form, the cpu; attention kinds with AMOR_KV_STEP_PATH=0) leave them empty, with the reason in
//            the note. The eager decode runs eagerly whatever AMOR_DECODE_GRAPHS says.
// AMOR models run once per --fire-rate r (0.22 by default, the paper's rate): the gates'
// thresholds are set so that a fraction r of decode tokens fire in every block (tau the (1 - r)
// quantile of the block's gate entropies over 128 calibration decode steps of 8 sequences after
// a 64-token prompt, random tokens as in the timed steps; block by block, each block
// calibrated with the earlier ones already set); r = 0 sets tau = +inf (the gate's own cost:
// every LM-head gate runs, no attention does), r = 1 -inf. The
// rate measured over the timed decode steps is reported next to it. --amor-form times AMOR in each
// inference form listed (models/amor/amor_attention.h: sparse reads the gate back and runs Q and O
// at the fired rows; dense runs them at every row with nothing read back), default the model's own
// (AMOR_BLOCK_INFERENCE, sparse when unset). --gate times AMOR with each gate input listed:
// lm-head (the default: the tied LM head's normalised entropy, one [V x d] pass per block and
// token) or router (the paper's fitted router, models/amor/entropy_router.h: a width-512 MLP per
// block in its place; here with random weights, router_init, since its cost does not depend on
// them, and the thresholds calibrated on its predictions as above). A context that does not fit
// (an out-of-memory error) ends that batch size's sweep of contexts with a row saying so.
//
// Writes FILE.csv (default bench_decode.csv; temp + rename) with one row per (run, batch,
// context, fire rate): run, kind, params, device, dtype, batch, context, fire_target, prefill_ms,
// prefill_tok_s, decode_ms, decode_tok_s, fire_decode, graph_ms, graph_tok_s, note, amor_form,
// gate (sparse or dense, lm-head or router for AMOR; empty for the other kinds). Prints the
// same as a table.
// Exit status: 0 done, 1 failure (message on err), 2 usage error.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace amor {

bool is_bench_decode(int argc, const char* const* argv);
// args: after "bench-decode".
int bench_decode_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace amor
