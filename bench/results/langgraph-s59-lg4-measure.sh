cd /work/main; U=${1:?a server URL}
for r in 1 2 3 4; do for v in before after pg; do case $v in before) P=${BEFORE:?a git archive of 1e80e9a}/src; k=flowmem;; after) P=${AFTER:?a git archive of this tree}/src; k=flowmem;; pg) P=$AFTER/src; k=postgres;; esac
PYTHONPATH=$P .venv/bin/python bench/results/langgraph-s59-lg4-replay.py $U $v $k 15; echo "load $(cut -d' ' -f1-3 /proc/loadavg)"; done; done
