#!/usr/bin/env bash
# the shipped recipe (checkpoints/README.md) with and without the form feature, seeds 0-2
set -euo pipefail
L=training/data/labels
LABELS="--labels $L/lean/answer_nq.jsonl --labels $L/lean/answer_squad.jsonl --labels $L/lean/answer_hotpotqa.jsonl --labels $L/lean/answer_2wiki.jsonl --labels $L/lean/answer_musique.jsonl --labels $L/answer_medical.jsonl --labels $L/answer_lists.jsonl"
RECIPE="--set-priors 100 --hop-priors 300 --hop-pairs 200 --list-priors 100 --cost-weight 1.0 --val-frac 0 --epochs 80"
BASE=specificity,length,qword,entities,comparison,chain,relative,pair,dates,numbers,depth,operators,lookups
for seed in 0 1 2; do
  for variant in base form; do
    feats=$BASE; [ $variant = form ] && feats=$BASE,form
    out=runs/mlp_form/${variant}_s$seed.ckpt
    [ -f $out ] && continue
    /usr/bin/time -f "$variant s$seed %e s" .venv/bin/logicroute train generalist $LABELS $RECIPE --features $feats --seed $seed --out $out
  done
done
