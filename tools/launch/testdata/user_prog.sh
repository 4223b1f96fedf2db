#!/bin/sh
# A user's own training program in the launcher's tests: it gets no flags from the launcher and
# learns the job from COHORT_* variables only. Leaves worker-<rank>.done in FAKE_DIR for the
# fake scheduler.
echo "user program rank $COHORT_RANK of $COHORT_NUM_WORKERS, scheduler $COHORT_SCHEDULER," \
  "job $COHORT_JOB_ID, args: $*, cwd: $(pwd -P)"
touch "$FAKE_DIR/worker-$COHORT_RANK.done"
