#!/bin/bash
# LG6 (decision 0221): bench/langgraph.py at main's src, three runs in a row, load logged
cd /work/wt-lg6
P=/work/main/.venv/bin/python
for i in 1 2 3; do
  echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) run $i"
  PYTHONPATH=/work/wt-lg6/src $P bench/langgraph.py --postgres start --only alone,null,flowmem,postgres --lengths 100,1000 --repeats 3 --json bench/results/langgraph-s61-lg6-bench-$i.json > bench/results/langgraph-s61-lg6-bench-$i.txt 2>&1
done
echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) done"
