#!/usr/bin/env bash
# `make test`: lint and the packaging check beside the whole test suite, not before it (decision 0146).
#
# The packaging check mostly waits (builds, installs, servers starting: ~70 s of CPU in
# ~190 s), so running it and lint before the suite left a core idle for minutes; beside
# the suite they take what the suite's workers leave. Their output is kept and printed
# after the suite's, as one block per target, then the suite's closing line once more,
# so the run's last line is pytest's count. Exit 1 when either part failed.
#
# Usage (from the Makefile): scripts/make_test.sh PYTHON [MAKE]
set -uo pipefail

python=$1
make=${2:-make}
checks_log=$(mktemp)
suite_log=$(mktemp)
trap 'rm -f "$checks_log" "$suite_log"' EXIT

"$make" --no-print-directory -j2 --output-sync=target lint packaging >"$checks_log" 2>&1 &
checks=$!

# the checkout compiled once (assert-rewritten tests, src, bench, scripts) while lint runs on the
# other core, not by each worker for itself at the same moment: a fresh clone's collection costs
# each worker ~13 s of CPU more without it (decision 0173). A failure here only costs that time.
PYTHONDONTWRITEBYTECODE= "$python" scripts/warm_bytecode.py || echo "warm_bytecode.py failed: each worker compiles for itself"

# one worker more than the cores: the suite's tests wait (servers starting, processes
# killed and started again), and on 2 cores two workers left 135 core-seconds idle where
# three leave 23 (decision 0162, measured by scripts/suite_demand.py)
workers=$(( $(nproc) + 1 ))
# bytecode caching on even where PYTHONDONTWRITEBYTECODE is set (see the Makefile)
PYTHONDONTWRITEBYTECODE= "$python" -m pytest -q -n "$workers" --dist worksteal --durations=15 | tee "$suite_log"
suite=${PIPESTATUS[0]}

wait "$checks"
checked=$?
echo
echo "---- lint and the packaging check (run beside the suite): exit $checked"
cat "$checks_log"
echo "---- the test suite: exit $suite"
tail -n 1 "$suite_log"
[ "$suite" -eq 0 ] && [ "$checked" -eq 0 ]
