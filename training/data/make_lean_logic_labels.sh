#!/usr/bin/env bash
# The logic route of every answer-label row answered again with the lean logic preset
# (engine.core.routes.logic.config.PRESETS["lean"]), chunk and summary copied from the row: the
# labels a router needs once lean is the logic route it routes to. Resumable: rerun to continue.
#
# Reads training/data/labels/answer_<set>.jsonl (made by make_answer_labels.sh, with the same KBs
# under runs/labels_kb/) and writes training/data/labels/lean/answer_<set>.jsonl. Rounds grow every
# set (every Medical type) by ROUND questions in turn, so an interrupted run still covers every set.
#
#   training/data/make_lean_logic_labels.sh [MAX_PER_SET] [ROUND]
#
# ONLY (environment, default every set): the sets this run relabels, e.g. ONLY="musique medical";
# two runs over disjoint sets, each pinned to one core (taskset -c 0 / -c 1), keep both cores busy.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=${1:-100}
ROUND=${2:-10}
BIN=${BIN:-.venv/bin}
ONLY=${ONLY:-musique 2wiki hotpotqa nq squad medical}
SETS=()
for entry in "musique 1" "2wiki 1" "hotpotqa 1" "nq 1" "squad 26"; do
  [[ " $ONLY " == *" ${entry%% *} "* ]] && SETS+=("$entry")
done
TYPES=("Fact Retrieval" "Complex Reasoning" "Contextual Summarize" "Creative Generation")
mkdir -p training/data/labels/lean
rerun=(--rerun logic --logic-preset lean)
for ((n = ROUND; n <= MAX; n += ROUND)); do
  for entry in "${SETS[@]}"; do
    read -r name stride <<<"$entry"
    "$BIN/logicroute" label "$name" --kb "runs/labels_kb/$name" --build-kb --kb-questions 100 \
      --offset 100 --stride "$stride" --n "$n" "${rerun[@]}" --from "training/data/labels/answer_$name.jsonl" \
      --out "training/data/labels/lean/answer_$name.jsonl"
  done
  for type in "${TYPES[@]}"; do
    [[ " $ONLY " == *" medical "* ]] || break
    "$BIN/logicroute" label medical --kb runs/labels_kb/medical --build-kb --question-type "$type" \
      --offset 40 --n $(((n + 3) / 4)) --metric rouge_l --style reader "${rerun[@]}" \
      --from training/data/labels/answer_medical.jsonl --out training/data/labels/lean/answer_medical.jsonl
  done
done
