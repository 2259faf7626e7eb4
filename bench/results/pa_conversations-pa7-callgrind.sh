#!/bin/bash
# usage: cgrun.sh VARIANT TURNS [PYTHONPATH]
cd /work/main
export VARIANT=$1 TURNS=$2 PYTHONHASHSEED=0
[ -n "$3" ] && export PYTHONPATH=$3
valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out.$1.$2.$$ .venv/bin/python bench/results/pa_conversations-pa7-callgrind.py 2>&1 | grep -o "Collected : [0-9]*" | sed "s#^#$1 turns=$2 #"
true
