#!/bin/bash
# cold_compile.sh NNC MODEL: one cold compile of MODEL by the nnc binary NNC (an empty object
# cache, NNC_DEBUG=time, `nnc bench --threads 2 --iterations 1`): prints wall and user CPU
# seconds of the whole process and the three codegen parts that took longest (ms, wall).
B=$1; M=$2; C=$(mktemp -d /tmp/ctcold.XXXX)
NNC_CACHE_DIR=$C NNC_DEBUG=time /usr/bin/time -f "TIME %e %U" $B bench $M --threads 2 --iterations 1 > $C.log 2>&1
w=$(grep "^TIME" $C.log | awk '{print $2, $3}')
top=$(grep "codegen: part" $C.log | sed 's/.*part \([^ ]*\) (cost [0-9]*): \([0-9.]*\) ms.*/\2 \1/' | sort -rn | head -3 | awk '{printf "%s:%.0f ", $2, $1}')
echo "$(basename $B) $(basename $M) wall_user $w top: $top"
rm -rf $C $C.log
