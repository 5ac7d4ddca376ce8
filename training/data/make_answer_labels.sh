#!/usr/bin/env bash
# Answer-scored router labels with the local model, resumable: rerun to continue.
#
# Factoid sets (nq, squad, hotpotqa, 2wiki, musique): questions from index 100 on (0-99 are the
# benchmarks' questions, never trained on), one KB per set from the passages of its first 100
# labelled questions (SQuAD: every 26th question, spread over its articles), extractive summary
# layers; short answers scored with F1. Every route runs on every question. The first rows were
# made with a cascade (--stop-score 1.0: the costlier routes skipped once chunk was perfect, and
# credited with its perfect score); the run first completes those (--complete), since the
# credit overstates them: on the README benchmark's questions where chunk was perfect, logic
# scored 0.74 F1.
#
# GraphRAG-Bench Medical: one KB over its whole corpus; each question type labelled from its
# 41st question on (the first 40 of each type are the benchmark's); reader-style (sentence)
# answers scored with ROUGE-L, which never reaches 1.0, so every route runs.
#
# Each row also records how sure the model was of each cheap answer it gave ("confidence": the
# geometric mean of the answer's token probabilities), which escalation by certainty is fitted on.
#
# Rounds grow every set (every Medical type) by ROUND questions in turn, so an interrupted run
# still covers every set. Label files: training/data/labels/answer_<set>.jsonl.
#
#   training/data/make_answer_labels.sh [MAX_PER_SET] [ROUND] [FIRST]
#
# ONLY (environment, default every set): the sets this run labels, e.g. ONLY="nq squad medical";
# two runs over disjoint sets, each pinned to one core (taskset -c 0 / -c 1), keep both cores busy
# while each set's KB build and retrieval overlap the other run's LLM calls.
#
# FIRST (default ROUND): questions per set in the first round; a resumed run that already holds
# 70 a set starts at 80 without reopening every KB for the rounds it has done.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=${1:-100}
ROUND=${2:-10}
FIRST=${3:-$ROUND}
BIN=${BIN:-.venv/bin}
ONLY=${ONLY:-nq squad hotpotqa 2wiki musique medical}
SETS=()
for entry in "nq 1" "squad 26" "hotpotqa 1" "2wiki 1" "musique 1"; do
  [[ " $ONLY " == *" ${entry%% *} "* ]] && SETS+=("$entry")
done
TYPES=("Fact Retrieval" "Complex Reasoning" "Contextual Summarize" "Creative Generation")
factoid() {  # SET STRIDE N [--complete]
  "$BIN/logicroute" label "$1" --kb "runs/labels_kb/$1" --build-kb --kb-questions 100 \
    --offset 100 --stride "$2" --n "$3" ${4:-} --logic-preset paper --out "training/data/labels/answer_$1.jsonl"
}
for entry in "${SETS[@]}"; do  # once: rows a cascade made, wherever they are
  read -r name stride <<<"$entry"
  factoid "$name" "$stride" "$MAX" --complete
done
for ((n = FIRST; n <= MAX; n += ROUND)); do
  for entry in "${SETS[@]}"; do
    read -r name stride <<<"$entry"
    factoid "$name" "$stride" "$n"
  done
  for type in "${TYPES[@]}"; do
    [[ " $ONLY " == *" medical "* ]] || break
    "$BIN/logicroute" label medical --kb runs/labels_kb/medical --build-kb --question-type "$type" \
      --offset 40 --n $(((n + 3) / 4)) --metric rouge_l --style reader \
      --logic-preset paper --out training/data/labels/answer_medical.jsonl
  done
done
