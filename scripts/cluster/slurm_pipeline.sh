#!/usr/bin/env bash
# Generate, score and merge one model on one benchmark as Slurm jobs: two job arrays of SHARDS tasks and
# the merge, each step waiting for the previous one to succeed (docs/cluster.md). Usage:
#   BENCHMARK=cogcanvas DATA=built/cogcanvas SUB=subs/mine OUT=scores/mine CACHE=/shared/idbench-features \
#   MODEL=diffusers-image-list MODEL_ID=<hub id> REVISION=<commit> SHARDS=8 bash scripts/cluster/slurm_pipeline.sh
# Extra flags: GENERATE_ARGS="--resolution 1024 --dtype bfloat16", SCORE_ARGS="--metrics id_sim,dino_sim";
# DEVICE (default cuda).
set -euo pipefail
: "${BENCHMARK:?}" "${DATA:?}" "${SUB:?}" "${OUT:?}" "${CACHE:?}" "${MODEL:?}" "${SHARDS:?}"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p logs
export BENCHMARK DATA SUB OUT CACHE MODEL MODEL_ID REVISION GENERATE_ARGS SCORE_ARGS DEVICE
# SHARDS is checked as text before any arithmetic: bash evaluates a variable's text inside $((...)), so
# SHARDS='PATH[$(touch X)]+2' would run a command. Digits only, 1 to 10000 (10# reads 08 as eight).
if ! [[ $SHARDS =~ ^[0-9]+$ ]] || ((${#SHARDS} > 5)) || ((10#$SHARDS < 1 || 10#$SHARDS > 10000)); then
    printf '%s: SHARDS must be a whole number of shards from 1 to 10000; got %q\n' "$(basename "$0")" "$SHARDS" >&2
    exit 2
fi
last=$((10#$SHARDS - 1))
generate=$(sbatch --parsable --export=ALL --array="0-$last" "$here/generate.sbatch")
score=$(sbatch --parsable --export=ALL --array="0-$last" --dependency="afterok:$generate" "$here/score.sbatch")
merge=$(sbatch --parsable --export=ALL --dependency="afterok:$score" "$here/merge.sbatch")
echo "submitted: generate $generate (array 0-$last), score $score (after it), merge $merge (after that)"
echo "a failed task: sbatch --export=ALL --array=<index> $here/<step>.sbatch, then the later steps again"
