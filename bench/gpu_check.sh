#!/usr/bin/env bash
# The prepared GPU check (issue 41, item 3): the paper-random profile's speed on one GPU, in under 8 minutes.
#
#   1. bench/model_throughput.py: images per second of each model of the profile (CLIP ViT-L/14 images and
#      texts, DINOv2-B, DINOv3-B, the aesthetic head, Grounding DINO-T, SAM 2.1 Hiera-T) on --images of the
#      shipped sample images, after making the full-size random weights (about 3 GB, from the configurations
#      shipped with idbench: nothing is downloaded);
#   2. bench/stage_throughput.py: the sample builds of CogCanvas, CHARIS and Identity Collapse (bench/paper_scale.py,
#      a 0.1-scale builder, does not exist yet) scored end to end with a 1024 px model-free submission each, every
#      scoring stage timed, and the time projected to each benchmark's paper size (CogCanvas 1,361 prompts and
#      1,952 references; CHARIS 1,078 prompts and 154 subjects; Identity Collapse 75 prompts x 3 seeds).
#
# Random weights: plumbing and timing only, never scores. ArcFace (the face metrics) cannot be made offline and
# is reported "not run"; judged metrics need a judge and are not run either.
#
# Self-contained: it runs the .venv of this working tree, sets every Hugging Face library offline, and fetches
# nothing. Each step runs under `timeout`, inside a total budget (--budget, default 450 s); what finished is
# kept. Figures (JSON) and logs go to $OUT when it is set, else to idbench-output/gpu-check/.
#
#   bench/gpu_check.sh                         # on the GPU machine: cuda, the whole samples
#   bench/gpu_check.sh --device cpu --images 1 --prompts 2 --benchmarks cogcanvas --metrics clip_t,dino_sim
#                                              # a dry run of the plumbing on a CPU (minutes, not timings)
#
# Options: --device D (cuda), --images N (36), --prompts N (the whole sample), --benchmarks a,b (all three),
#          --metrics a,b (each suite), --budget S (450), --models-dir DIR ($IDBENCH_MODELS, else a folder in /tmp
#          kept between runs on one machine).
set -uo pipefail

cd "$(dirname "$0")/.."
DEVICE=cuda IMAGES=36 PROMPTS="" BENCHMARKS="cogcanvas,charis,identity-collapse" METRICS="" BUDGET=450
MODELS_DIR="${IDBENCH_MODELS:-${TMPDIR:-/tmp}/idbench-gpu-check-models}"
while [ $# -gt 0 ]; do
    case "$1" in
        --device) DEVICE="$2"; shift 2 ;;
        --images) IMAGES="$2"; shift 2 ;;
        --prompts) PROMPTS="$2"; shift 2 ;;
        --benchmarks) BENCHMARKS="$2"; shift 2 ;;
        --metrics) METRICS="$2"; shift 2 ;;
        --budget) BUDGET="$2"; shift 2 ;;
        --models-dir) MODELS_DIR="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

PY=.venv/bin/python
[ -x "$PY" ] || { echo "gpu_check.sh: no .venv/bin/python in $(pwd): run it from a checkout with its .venv" >&2; exit 2; }
RESULTS="${OUT:-idbench-output/gpu-check}"
mkdir -p "$RESULTS" "$MODELS_DIR"
export IDBENCH_MODELS="$MODELS_DIR" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
START=$(date +%s)
# Progress bars of transformers and datasets (carriage-return lines), left out of the log.
NOISE='Loading weights\|Writing model shards\|Creating parquet\|Generating .* split\|^Map: \|Map: [ 0-9]*%'
left() { echo $(( BUDGET - ($(date +%s) - START) )); }

{
    echo "gpu_check.sh: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), device $DEVICE"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), 'threads', torch.get_num_threads())"
} 2>&1 | tee "$RESULTS/gpu_check.log"
if [[ "$DEVICE" == cuda* ]] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check.sh: --device $DEVICE but torch sees no CUDA device; nothing was timed" | tee -a "$RESULTS/gpu_check.log" >&2
    exit 3
fi

status=0
# Step 1 gets at most 40 % of the budget (it makes the weights, ~1 min on a 16-core machine); step 2 the rest.
step1=$(( BUDGET * 2 / 5 ))
echo "== model throughput (at most ${step1} s)" | tee -a "$RESULTS/gpu_check.log"
timeout --kill-after=10 "$step1" "$PY" bench/model_throughput.py --profile paper-random --device "$DEVICE" \
    --images "$IMAGES" --json "$RESULTS/model_throughput.json" 2>&1 | grep --line-buffered -v "$NOISE" | tee -a "$RESULTS/gpu_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "gpu_check.sh: model throughput stopped with exit code $rc (124: out of time)" | tee -a "$RESULTS/gpu_check.log"; status=1; }

step2=$(left)
if [ "$step2" -lt 30 ]; then
    echo "gpu_check.sh: no time left for the stage timing (${step2} s)" | tee -a "$RESULTS/gpu_check.log"
    exit 1
fi
echo "== stage throughput and projection (at most ${step2} s)" | tee -a "$RESULTS/gpu_check.log"
args=(--profile paper-random --device "$DEVICE" --benchmarks "$BENCHMARKS" --json "$RESULTS/stage_throughput.json")
[ -n "$PROMPTS" ] && args+=(--prompts "$PROMPTS")
[ -n "$METRICS" ] && args+=(--metrics "$METRICS")
timeout --kill-after=10 "$step2" "$PY" bench/stage_throughput.py "${args[@]}" 2>&1 \
    | grep --line-buffered -v "$NOISE" | tee -a "$RESULTS/gpu_check.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "gpu_check.sh: stage throughput stopped with exit code $rc (124: out of time); finished benchmarks are in $RESULTS/stage_throughput.json" | tee -a "$RESULTS/gpu_check.log"; status=1; }
echo "gpu_check.sh: done in $(( $(date +%s) - START )) s; figures in $RESULTS (model_throughput.json, stage_throughput.json, gpu_check.log)" | tee -a "$RESULTS/gpu_check.log"
exit $status
