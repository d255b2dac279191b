#!/bin/bash
# Alternates `nnc bench` of two nnc builds (BEFORE, AFTER) on the shared models, an empty
# tuning cache for both (heuristic defaults), and prints each run's median latency (ms).
SHARED=${NNC_SHARED:-/work/shared}
EMPTY=$(mktemp -u /tmp/nnc-empty-XXXX.db)
BEFORE=${BEFORE:?path of the baseline nnc}; AFTER=${AFTER:-build/tools/nnc/nnc}
ROUNDS=${ROUNDS:-3}
for m in ${MODELS:-bert_layer_b1 mlp_b32 resnet18_b1}; do
 for t in ${THREADS:-1 2}; do
  for r in $(seq $ROUNDS); do
   for which in before after; do
    bin=$BEFORE; [ $which = after ] && bin=$AFTER
    ms=$($bin bench $SHARED/models/$m/model.onnx --threads $t --json --iterations ${ITERS:-10} --cache $EMPTY 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["median_ms"])')
    echo "$m t=$t $which $ms"
   done
  done
 done
done
