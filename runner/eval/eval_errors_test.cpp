// Missing and malformed task files: errors that name the file, the line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kernels/core/error.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/fake_eval_model.h"

namespace amor::eval {
namespace {

using testing::FakeEvalModel;

class EvalErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("amor_eval_errors_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << content;
    return path;
  }
  // The message of the error run_task throws ("" if none).
  std::string error_of(const std::string& task, const std::string& path) {
    FakeEvalModel model;
    try {
      run_task({.name = task, .path = path}, model);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "message: " << message;
}

TEST_F(EvalErrors, MissingFile) {
  const std::string missing = (dir_ / "nope.jsonl").string();
  expect_contains(error_of("piqa", missing), missing + ": no such file");
  expect_contains(error_of("lambada", ""), "lambada: no data file given");
}

TEST_F(EvalErrors, BadJsonNamesFileLineAndColumn) {
  const auto path = write("bad.jsonl", "{\"text\": \"a b\"}\n{\"text\" \"c d\"}\n");
  expect_contains(error_of("lambada", path), path + ":2:9:");
  const auto array = write("array.jsonl", "[1, 2]\n");
  expect_contains(error_of("lambada", array), array + ":1: expected a JSON object");
}

TEST_F(EvalErrors, MissingAndMistypedFields) {
  const auto missing = write("piqa.jsonl",
                             "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 0}\n"
                             "{\"goal\": \"g\", \"sol1\": \"a\", \"label\": 1}\n");
  expect_contains(error_of("piqa", missing), missing + ":2: no field 'sol2' (the object has: goal, sol1, label)");
  const auto mistyped = write("piqa2.jsonl", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": \"zero\"}\n");
  expect_contains(error_of("piqa", mistyped), mistyped + ":1: field 'label' must be an integer, got \"zero\"");
  const auto gold = write("piqa3.jsonl", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 2}\n");
  expect_contains(error_of("piqa", gold), gold + ":1: the gold answer 2 is not one of the 2 choices");
  const auto hs = write("hs.jsonl", "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", "
                                    "\"endings\": [\"x\", 3], \"label\": \"0\"}\n");
  expect_contains(error_of("hellaswag", hs), hs + ":1: field 'endings' must be an array of strings, but element 1 is 3");
  const auto arc = write("arc.jsonl", "{\"question\": \"q\", \"choices\": {\"text\": [\"x\"], \"label\": [\"A\"]}, \"answerKey\": \"B\"}\n");
  expect_contains(error_of("arc_easy", arc), arc + ":1: field 'answerKey' 'B' is not one of the choice labels");
  const auto wg = write("wg.jsonl", "{\"sentence\": \"no blank\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"1\"}\n");
  expect_contains(error_of("winogrande", wg), wg + ":1: field 'sentence' has no '_' blank");
  const auto lb = write("lb.jsonl", "{\"input\": \"q\", \"context\": \"c\", \"answers\": [\"a\"], \"length\": 3, "
                                    "\"dataset\": \"trec\", \"all_classes\": null, \"_id\": \"x\"}\n");
  expect_contains(error_of("longbench_qasper", lb), lb + ":1: field 'dataset' is 'trec'");
}

TEST_F(EvalErrors, UnknownTaskListsTheKnownOnes) {
  expect_contains(error_of("lambada_standard", ""), "unknown task 'lambada_standard' (known: lambada, hellaswag");
  EXPECT_TRUE(is_known_task("longbench_repobench-p"));
  EXPECT_FALSE(is_known_task("longbench_dureader"));  // Chinese datasets are not included
  EXPECT_THROW(task_layout({.name = "nope"}), Error);
}

}  // namespace
}  // namespace amor::eval
