-- _snooze: the outcomes of attempts whose handler snoozed (Go's Snooze(d)):
-- each row of processor p_processor's claim (NULL: a direct batch's, locked
-- in the caller's transaction) goes back, due after its p_delays, with no
-- attempt spent; the log records 'snoozed', its error naming when it is
-- due. A row at _max_snoozes(), or whose event is being cancelled, is
-- recorded as a failed attempt instead (_complete_outcomes: the latter ends
-- cancelled). done and gave_up as _complete_outcomes returns them.

CREATE OR REPLACE FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_ids bigint[];
  v_at timestamptz[];
  r record;
BEGIN
  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_delays) AS o(id, claimed_at, delay)
  ), up AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL, snoozes = q.snoozes + 1,
           not_before = pg_catalog.clock_timestamp() + GREATEST(COALESCE(o.delay, interval '0'), interval '0')
      FROM o
     WHERE q.id = o.id
       AND CASE WHEN p_processor IS NULL THEN q.dispatched_at IS NULL
                ELSE q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at END
       AND q.snoozes < pgrelay._max_snoozes()
       AND NOT EXISTS (SELECT FROM pgrelay.cancels k WHERE k.origin_id = q.origin_id)
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.not_before, q.priority
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT up.id, up.origin_id, up.channel, up.attempt, 'snoozed',
           'snoozed until ' || pg_catalog.to_char(up.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           v_node, NULLIF(up.priority, 0)
      FROM up ORDER BY up.id
    RETURNING queue_id
  )
  SELECT (SELECT count(*) FROM lg),
         (SELECT pg_catalog.array_agg(o.id ORDER BY o.id) FROM o WHERE o.id NOT IN (SELECT lg.queue_id FROM lg)),
         (SELECT pg_catalog.array_agg(o.claimed_at ORDER BY o.id) FROM o WHERE o.id NOT IN (SELECT lg.queue_id FROM lg))
    INTO done, v_ids, v_at;
  gave_up := '{}';
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  -- The rest: those past the bound or being cancelled fail their attempt
  -- (a row no longer held is not recorded there either).
  SELECT * INTO r
    FROM pgrelay._complete_outcomes(p_processor, v_ids, v_at,
           pg_catalog.array_fill('failed'::text, ARRAY[pg_catalog.cardinality(v_ids)]),
           pg_catalog.array_fill(pg_catalog.format('snoozed %s times, the most an event may', pgrelay._max_snoozes()),
                                 ARRAY[pg_catalog.cardinality(v_ids)]));
  done := done + r.done;
  gave_up := r.gave_up;
END
$$;

REVOKE ALL ON FUNCTION pgrelay._snooze(bigint, bigint[], timestamp with time zone[], interval[]) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) TO pgrelay_processor;
