#!/usr/bin/env bash
# The demo's simulated health check, run by `run_worker` for verify jobs: it takes 1-3 s and
# passes 90% of the time (a failure sends the host to repair).
exec bash "$(dirname "$0")/simulated_run.sh" "verify: checking the DUT on" 1 3 90 \
  "DUT does not answer on ssh" "DUT answers, disk and network fine"
