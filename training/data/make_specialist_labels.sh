#!/usr/bin/env bash
# Answer-scored labels for a specialist (issue 67): every route answered with the local model and
# scored with F1, on questions no benchmark, LODO fold or generalist label reads. Resumable: rerun
# to continue; a kill loses at most the question being answered (rows are appended one by one).
#
# HotpotQA's file holds 500 questions: 0-99 are the routing benchmark's, 100-199 the generalist's
# labels (answer_hotpotqa.jsonl, which LODO judges on). This run labels 200-499 in three blocks of
# 100. Each block's KB is the passages of its own 100 questions (about 1,000 passages), the
# distractor density of the benchmark's and the generalist labels' KBs. Rounds grow every block by
# ROUND questions in turn, so an interrupted run still covers all three blocks evenly.
# Caveat: the shipped generalist's set priors (train generalist --set-priors 100) drew 100 silver
# HotpotQA rows from questions 100-499 less its labelled ones, i.e. from these blocks: about a
# third to a half of the questions labelled here were trained on. `logicroute bench specialist`
# finds them through the generalist's guard and uses them for training only, never to judge.
#
#   training/data/make_specialist_labels.sh [PER_BLOCK] [ROUND]
#
# SET (environment, default hotpotqa): the shared set, e.g. SET=2wiki (500 questions too).
# BLOCKS (environment, default "200 300 400"): the blocks this run labels. Two runs on disjoint
# blocks may share OUT (appends are locked), e.g. BLOCKS="200 300" on one core, BLOCKS=400 on the other.
# Pin it to one core (`taskset -c 1 ...`) to keep the other one free: the local model takes as
# many threads as the process may use.
set -euo pipefail
cd "$(dirname "$0")/../.."
PER_BLOCK=${1:-100}
ROUND=${2:-10}
BIN=${BIN:-.venv/bin}
SET=${SET:-hotpotqa}
BLOCKS=${BLOCKS:-200 300 400}
OUT=training/data/labels/specialist/$SET.jsonl
mkdir -p "$(dirname "$OUT")"
for ((n = ROUND; n <= PER_BLOCK; n += ROUND)); do
  for block in $BLOCKS; do
    "$BIN/logicroute" label "$SET" --kb "runs/specialist_kb/${SET}_$block" --build-kb --kb-questions 100 \
      --offset "$block" --n "$n" --logic-preset paper --out "$OUT"
  done
done
