// The evaluation harness's EvalModel over a real model (models/): teacher-forced scoring by one
// forward(training = false) per batch, greedy generation with the caches (greedy_generate), and the
// per-token records of each task's first sequences for run.h5 /tokens/<task>.
//
// The model must be unsharded (no unit hooks): the trainer evaluates a replica built from
// Fsdp::full_parameters(). Requests are cut into batches of batch_size in request order (padded
// on the right to the batch's longest sequence, with no target there: every model is causal, so
// padding never changes a scored position), and batch j runs on rank j mod W of the run's ranks;
// every rank then receives every result (host all-reduces in rank order), so all ranks score the
// task identically and rank 0 writes it. A batch holds the same requests at any W, so the scores
// at W ranks are bitwise those of one rank.
//
// Stop strings are checked on the decoded new text after every generated token (the harness cuts
// at the first stop string itself); stop ids and min_new_tokens go to greedy_generate as they are. Records (begin_task(name) starts a task's set): for scored
// sequences the input tokens, the normalised entropy, the loss where there is a target (NaN
// elsewhere), AMOR's gates, Oryx's modes and the requests' token roles (none where a request has
// none); for generated ones the prompt and the generated tokens but the last (what the model
// read), with the loss inside the prompt only and the generated tokens' role `answer` (where the
// request has roles).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/lm/language_model.h"
#include "runner/dist/communicator.h"
#include "runner/eval/eval_model.h"
#include "runner/output/run_file.h"

namespace amor::eval {

struct ModelEvalOptions {
  int64_t max_length = 2048;     // eval.max_length
  int64_t batch_size = 8;        // eval.batch_size
  int64_t prefill_chunk = 0;     // eval.prefill_chunk (greedy_generate's)
  int64_t tokens_per_task = 16;  // eval.tokens_per_task: sequences recorded per task
  // Progress of long tasks (a 32K-token NIAH example takes seconds to minutes; HellaSwag's 40K
  // scored sequences minutes on a CPU): called at most every note_every_s and after the last batch with a
  // line such as "niah_single_1: 2/3 requests generated; last batch: 1 x 32768-token prompt,
  // prefill 0.71 s, 127 decode steps 2.61 s (20.6 ms/step)" or "hellaswag: 1200/40168 sequences
  // scored (3,400 tokens/s)" (counts: the requests this rank was dealt). A scoring call that takes
  // under 10 s in all says nothing. Unset: silent.
  std::function<void(const std::string&)> note;
  double note_every_s = 10.0;
};

class ModelEval final : public EvalModel {
 public:
  // comm: the run's ranks (host collectives), or nullptr for this process alone. The records
  // hold the model's token columns (LanguageModel::token_columns).
  ModelEval(model::LanguageModel& model, const Tokenizer& tokenizer, dist::Communicator* comm,
            ModelEvalOptions options);

  std::vector<LoglikResult> loglikelihood(const std::vector<LoglikRequest>& requests) override;
  std::vector<TeacherForcedResult> teacher_forced(const std::vector<TeacherForcedRequest>& requests) override;
  std::vector<TeacherForcedResult> teacher_forced_modes(
      const std::vector<TeacherForcedRequest>& requests,
      const std::vector<std::vector<uint8_t>>& modes) override;
  std::vector<std::string> generate(const std::vector<GenRequest>& requests) override;
  int64_t max_length() const override { return opt_.max_length; }
  const Tokenizer& tokenizer() const override { return tok_; }
  void begin_task(const std::string& name) override;

  // The recorded sequences of a task (empty if it recorded none).
  TokenSequences records(const std::string& task) const;
  const std::vector<model::TokenColumn>& token_columns() const { return columns_; }

 private:
  struct Recorded {
    TokenSequences seqs;                     // columns left empty; rows below
    std::vector<std::vector<uint8_t>> rows;  // the model's token rows, [row][total]
  };
  std::vector<TeacherForcedResult> score(const std::vector<TeacherForcedRequest>& requests,
                                         const std::vector<std::vector<uint8_t>>* modes);
  // How many of the next n sequences of the current task are recorded (the first ones).
  int64_t to_record(int64_t n) const;
  bool mine(int64_t batch_index) const;
  void exchange(std::vector<double>& values);  // sum over ranks (others contribute zeros)

  model::LanguageModel& model_;
  const Tokenizer& tok_;
  dist::Communicator* comm_;
  ModelEvalOptions opt_;
  std::vector<model::TokenColumn> columns_;
  int64_t rows_ = 0;  // token_row_count(columns_)
  bool modes_ = false;  // the model takes per-token mixer modes (LanguageModel::takes_modes)
  std::string task_;
  std::map<std::string, Recorded> records_;
};

}  // namespace amor::eval
