#!/usr/bin/env bash
# One simulated run for the demo's scripts: simulated_run.sh WHAT MIN_S MAX_S PASS_PERCENT
# FAIL_MESSAGE PASS_MESSAGE. It says what it does, takes MIN_S-MAX_S seconds, and exits 0
# (passed) PASS_PERCENT% of the time, else 1 (failed).
set -u
what=$1 min=$2 max=$3 pass_percent=$4 fail_message=$5 pass_message=$6
seconds=$(( RANDOM % (max - min + 1) + min ))
echo "${what} ${SCHEDSITE_HOST:-host}: ${seconds}s"
sleep "$seconds"
if (( RANDOM % 100 >= pass_percent )); then
  echo "FAIL: ${fail_message}"
  exit 1
fi
echo "PASS: ${pass_message}"
