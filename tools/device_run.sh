#!/bin/bash
# Parts of tools/queue.json on a lent accelerator machine, packed into $OUT as they land.
#
#   here:   bash tools/device_run.sh --prepare [DATA...]   (once per session: fills .dev/, ignored)
#   there:  bash tools/device_run.sh DEADLINE POOL [--legacy] PART...   (carry .dev and any
#           results/.checkpoints/<chapter>/<experiment>.<part> folders to resume)
#
# The machine may receive the working tree without .git (the results' provenance would read
# "unknown") or with a stale one: --prepare makes a shallow bare clone of HEAD (.dev/git) that the
# run uses instead, and downloads the pure-Python wheels the machine's image lacks (.dev/whl). The
# run then calls tools/run_queue.py with --pool, --deadline and --pack "$OUT" (--legacy: the parts
# whose results file is legacy, run again): at the deadline the parts still running stop at their
# last checkpoint, and the packed checkpoints (ckpt.tgz.*) resume them there or here with the same
# command. Commit before --prepare: the clone is of HEAD, and a tracked file that differs from it
# marks every result "-dirty". The machine reaches no network and ../shared does not travel: DATA
# names folders of ../shared/data that --prepare copies into .dev/data, which the run reads as
# LIB_DATA_DIR (the whole of ../shared/data is more than a call may carry).
cd "$(dirname "$0")/.." || exit 1
if [ "$1" = "--prepare" ]; then
  rm -rf .dev/git .dev/whl && mkdir -p .dev/whl || exit 1
  git clone -q --bare --depth 1 "file://$PWD" .dev/git || exit 1
  python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .dev/whl \
    pooch==1.9.0 platformdirs==4.14.8 || exit 1
  rm -rf .dev/data && mkdir -p .dev/data || exit 1
  for d in "${@:2}"; do
    mkdir -p ".dev/data/$(dirname "$d")" && cp -r "../shared/data/$d" ".dev/data/$d" || exit 1
  done
  du -sh .dev
  exit 0
fi
deadline=$1 pool=$2
shift 2
legacy=()
if [ "$1" = "--legacy" ]; then legacy=(--legacy); shift; fi
export PYTHONUNBUFFERED=1
if [ -d .dev/data ]; then export LIB_DATA_DIR=$PWD/.dev/data; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .dev/whl/*.whl && export PYTHONPATH=/tmp/site
git config --global --add safe.directory '*'
# The carried clone, even where the copy has a .git: one found there named an older commit than
# the tree (its diff then made every record "-dirty").
export GIT_DIR=$PWD/.dev/git GIT_WORK_TREE=$PWD
git config core.bare false
git config core.fileMode false
git reset -q
echo "HEAD $(git rev-parse HEAD)"
git diff HEAD --stat -- . ':(exclude)results' | tail -3
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
python3 -c "import jax, flax, optax; print(jax.__version__, flax.__version__, jax.devices())"
python3 tools/run_queue.py "${legacy[@]}" --only "$@" --pool "$pool" --deadline "$deadline" \
  --pack "$OUT"
cp results/.queue/queue.log "$OUT/" 2>/dev/null
