#!/usr/bin/env bash
# The demo's simulated provisioning, run by `run_worker --provision-cmd` before a test whose
# lease asks for a build the host does not carry: it takes 2-6 s and works 95% of the time;
# a failure sends the host to repair and the job to another host.
exec bash "$(dirname "$0")/simulated_run.sh" "provision: flashing ${SCHEDSITE_BUILD:-?} onto" 2 6 95 \
  "image verification failed after flashing" "booted ${SCHEDSITE_BUILD:-?}"
