#!/usr/bin/env bash
# The demo's simulated repair, run by `run_worker` for repair jobs: it takes 3-8 s and passes
# 70% of the time, so now and then a host fails REPAIR_MAX_ATTEMPTS repairs in a row and ends
# repair_failed, for staff to see.
exec bash "$(dirname "$0")/simulated_run.sh" "repair: reflashing and power-cycling" 3 8 70 \
  "DUT still does not boot after reflash" "DUT reflashed and back up"
