// LongBench's scoring functions (THUDM/LongBench, LongBench/metrics.py), reimplemented. Each takes
// one prediction and one reference answer; LongBench scores an example by the maximum over its
// answers (longbench_score.h). Text is UTF-8 with Python's str semantics (data/text/
// unicode_text.h): str.lower() with its full mappings and final sigma, str.split() on Unicode
// whitespace, re's \d and \w over Unicode; characters are code points. string.punctuation alone
// is ASCII, as in Python. tests/eval_reference checks every function against a transcription of
// metrics.py on Unicode-heavy cases.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace amor::eval {

// SQuAD's normalisation as LongBench's normalize_answer: str.lower() (CAFÉ -> café, İ -> i̇, Σ ->
// ς at a word's end), drop ASCII punctuation (string.punctuation; “ ” ‘ ’ stay), replace the words
// a/an/the (regex \b(a|an|the)\b, with Unicode \w: “the” loses its "the") by a space, collapse
// Unicode whitespace (str.split(): NBSP, U+3000, ...) to single spaces.
std::string normalize_answer(std::string_view s);
// Bag-of-tokens F1 (collections.Counter intersection); 0 when nothing is shared.
double token_f1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth);
// qa_f1_score: token_f1 of the whitespace tokens of the normalised texts.
double qa_f1_score(std::string_view prediction, std::string_view truth);

// rouge_score: ROUGE-L F as the `rouge` package (pltrdy/rouge 1.0.1, Rouge().get_scores(..)
// ["rouge-l"]["f"]) computes it, i.e. summary-level LCS over sentences split at '.' with each
// sentence's whitespace collapsed (" ".join(s.split()), Unicode whitespace), words split at single
// spaces, counted as sets (its default `exclusive`); no case folding:
//   m = |distinct reference words|, n = |distinct prediction words|,
//   U = union over (reference sentence r, prediction sentence c) of the words of the LCS of r and
//       c reconstructed by its backtrack (diagonal on a match, else up when the upper cell is
//       strictly larger, else left),
//   R = |U|/m, P = |U|/n, F = 2PR/(P + R + 1e-8).
// LongBench returns 0 where the package raises (a prediction or reference with no sentence).
double rouge_l_score(std::string_view prediction, std::string_view truth);

// fuzzywuzzy's fuzz.ratio with python-Levenshtein: 100 for equal strings, 0 if either is empty,
// else round-half-even(100 * (L - d) / L), L = total code points, d = the insert/delete edit
// distance (substitution costs 2) = L - 2 * LCS.
int fuzz_ratio(std::string_view a, std::string_view b);
// code_sim_score: the first line of the prediction (leading newlines dropped) containing none of
// '`', '#', "//" (else ""), fuzz_ratio against the truth / 100.
double code_sim_score(std::string_view prediction, std::string_view truth);

// classification_score: the classes that occur in the prediction (substring), minus those that
// occur inside the truth without equalling it (removed while iterating, as LongBench's loop does,
// so the element after a removed one is not examined); 1/len if the truth is among them, else 0.
// (LongBench's difflib fallback sits behind `if em_match_list != 0`, which is always true, so it
// never runs.)
double classification_score(std::string_view prediction, std::string_view truth,
                            const std::vector<std::string>& all_classes);
// retrieval_score: the id N of the truth's first "Paragraph N"; the fraction of the prediction's
// digit runs equal to N as strings (0 if it has none). A truth without "Paragraph N" is an error.
// Digits are re's \d, any Unicode decimal digit: "١٢" and "１２" are runs, which never equal "12".
double retrieval_score(std::string_view prediction, std::string_view truth);
// count_score: the fraction of the prediction's digit runs (as retrieval_score's) equal to the
// truth (0 if none).
double count_score(std::string_view prediction, std::string_view truth);

// LongBench's post-processing for trec, triviaqa, samsum and lsht: the first line after leading
// newlines, prediction.lstrip('\n').split('\n')[0].
std::string first_line(std::string_view prediction);

}  // namespace amor::eval
