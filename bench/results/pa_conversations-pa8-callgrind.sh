#!/bin/bash
# Decision 0220 (PA8): instructions a turn, whole process, before and after, by decision 0214's turn script.
# usage: pa_conversations-pa8-callgrind.sh NAME SRC TURNS   (then: turns 1-80 = (80 - 0) / 80, turns 81-160 = (160 - 80) / 80;
# the collector's share: callgrind_annotate --inclusive=yes OUT | grep 'gcmodule.c:gc_collect_main \[')
cd /work/main
VARIANT=worker TURNS=$3 PYTHONHASHSEED=0 PYTHONPATH=$2 valgrind --tool=callgrind --callgrind-out-file=/tmp/pa8/cg.$1.$3 \
  .venv/bin/python bench/results/pa_conversations-pa7-callgrind.py 2>&1 | grep -o "Collected : [0-9]*" | sed "s/^/$1 turns=$3 /"
