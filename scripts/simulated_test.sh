#!/usr/bin/env bash
# The demo's simulated test, run by `run_worker` once per job: it takes 3-12 s, passes 85% of
# the time, and in 3% of runs reports its DUT broken (exit status 3 -> host needs_repair).
set -u
seconds=$(( RANDOM % 10 + 3 ))
echo "${SCHEDSITE_JOB_NAME:-job} on ${SCHEDSITE_HOST:-host} [${SCHEDSITE_HOST_LABELS:-}]" \
  "build ${SCHEDSITE_BUILD:-none}: running for ${seconds}s"
sleep "$seconds"
roll=$(( RANDOM % 100 ))
if (( roll < 3 )); then
  echo "FAIL: DUT did not come back after reboot"
  exit 3
elif (( roll < 15 )); then
  echo "FAIL: simulated assertion failure"
  exit 1
fi
echo "PASS"
