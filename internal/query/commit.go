package query

// CommitPolls commits a batch of polls in one statement, each fenced on its
// claim (see corotask.commit_polls in sql/functions/commit.sql). The
// per-poll arguments are arrays, one entry per poll in the same order:
// @tasks and @claims the polls' tasks and claim tokens (@roots their trees'
// roots, NULL where not known), @states their new
// states, @taken how many messages each popped, @pop_from and @pop_to the
// seqs of those messages, @actions and @sleeps and @ats what each asked
// for, @results the results of those done, @effects their spawns and sends
// (JSON), @history whether each is kept in the history, @parents the
// parents as claimed. @keep_first and @keep_last bound each task's history;
// @claimed_by (or NULL) is the executor that the children marked with a
// claim token are created claimed by, for @claim_secs seconds. Returns a row
// (polled, superseded) per poll committed: one missing was fenced.
const CommitPolls = `SELECT polled, superseded FROM corotask.commit_polls(
    p_tasks      => @tasks,
    p_claims     => @claims,
    p_states     => @states,
    p_taken      => @taken,
    p_actions    => @actions,
    p_sleeps     => @sleeps,
    p_ats        => @ats,
    p_results    => @results,
    p_effects    => @effects,
    p_history    => @history,
    p_keep_first => @keep_first,
    p_keep_last  => @keep_last,
    p_parents    => @parents,
    p_claimed_by => @claimed_by,
    p_claim_secs => @claim_secs,
    p_pop_from   => @pop_from,
    p_pop_to     => @pop_to,
    p_roots      => @roots)`

// FailPoll records a failed poll, fenced on its claim (see
// corotask.fail_poll): failures+1, last_error @error (and @stack for a
// panic), the task asleep for @backoff, or ended when @max_failures is
// reached; @outcome ('failed' or 'panicked') and @history for its history
// row, bounded by @keep_first and @keep_last. Returns (claim_lost, ended).
const FailPoll = `SELECT claim_lost, ended FROM corotask.fail_poll(
    p_task         => @task,
    p_claim        => @claim,
    p_error        => @error,
    p_backoff      => @backoff,
    p_max_failures => @max_failures,
    p_outcome      => @outcome,
    p_stack        => @stack,
    p_history      => @history,
    p_keep_first   => @keep_first,
    p_keep_last    => @keep_last)`

// FailRecordLost records, in a task's history, a poll whose claim was lost
// (or whose task was canceled) before it could commit (see
// corotask.record_lost). Returns nothing.
const FailRecordLost = `SELECT corotask.record_lost(
    p_task       => @task,
    p_attempt    => @attempt,
    p_outcome    => @outcome,
    p_executor   => @executor,
    p_claimed_at => @claimed_at,
    p_error      => @error)`
