--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: pgrelay; Type: SCHEMA; Schema: -; Owner: postgres
--

CREATE SCHEMA pgrelay;


ALTER SCHEMA pgrelay OWNER TO postgres;

--
-- Name: pgrelay_notifier; Type: SCHEMA; Schema: -; Owner: postgres
--

CREATE SCHEMA pgrelay_notifier;


ALTER SCHEMA pgrelay_notifier OWNER TO postgres;

--
-- Name: _adopt(interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._adopt(p_dead_after interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  d pgrelay.nodes;
  v_adopter int;
  v_procs bigint[];
  n int := 0;
BEGIN
  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE pgrelay._may_adopt(x) AND x.last_seen >= now() - p_dead_after;
  IF v_adopter IS DISTINCT FROM v_node THEN
    RETURN 0;
  END IF;
  FOR d IN
    SELECT * FROM pgrelay.nodes x
     WHERE x.node_id >= 0 AND x.node_id <> v_node
       AND (x.last_seen < now() - p_dead_after OR x.decommissioned_at IS NOT NULL)
       AND x.mode <> 'single'
       AND (x.adopted_at IS NULL OR x.adopted_at < now() - p_dead_after)
     ORDER BY x.node_id
     FOR UPDATE SKIP LOCKED
  LOOP
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    n := n + pgrelay._adopt_rows(d.node_id, v_node, v_procs,
      CASE WHEN d.decommissioned_at IS NOT NULL
           THEN pg_catalog.format('node %s was decommissioned', d.node_id)
           ELSE pg_catalog.format('node %s is dead (no heartbeat for %s)', d.node_id, p_dead_after) END);
    DELETE FROM pgrelay.processors p WHERE p.node_id = d.node_id;
    UPDATE pgrelay.nodes x SET adopted_at = now() WHERE x.node_id = d.node_id;
  END LOOP;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._adopt(p_dead_after interval) OWNER TO postgres;

--
-- Name: _adopt_rows(integer, integer, bigint[], text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
  v_claims_only bool := EXISTS (SELECT FROM pgrelay.nodes x WHERE x.node_id = p_adopter AND x.mode = 'leader');
BEGIN
  WITH t AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.priority, q.dispatched_at IS NOT NULL AS was_claimed
      FROM pgrelay.queue q
     WHERE q.run_in_node IS NULL
       AND ((q.owner_node = p_dead AND NOT v_claims_only)
            OR (q.dispatched_at IS NOT NULL AND q.dispatched_by = ANY (p_procs)))
     FOR UPDATE OF q SKIP LOCKED
  ), u AS (
    UPDATE pgrelay.queue q
       SET owner_node = CASE WHEN q.owner_node = p_dead AND NOT v_claims_only THEN p_adopter ELSE q.owner_node END,
           dispatched_at = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_at END,
           dispatched_by = CASE WHEN q.dispatched_by = ANY (p_procs) THEN NULL ELSE q.dispatched_by END
      FROM t
     WHERE q.id = t.id
    RETURNING q.id
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
    SELECT t.id, t.origin_id, t.channel, t.attempt, 'adopted',
           pg_catalog.format('%s; adopted by node %s%s', p_why, p_adopter,
                             CASE WHEN t.was_claimed THEN ' (its claim was taken back)' ELSE '' END),
           NULLIF(t.priority, 0)
      FROM t WHERE t.id IN (SELECT u.id FROM u)
     ORDER BY t.id
    RETURNING 1
  )
  SELECT count(*) INTO n FROM lg;
  IF NOT v_claims_only THEN
    UPDATE pgrelay.schedule_defs s SET owner_node = p_adopter WHERE s.owner_node = p_dead;
  END IF;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) OWNER TO postgres;

--
-- Name: _adopters(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._adopters() RETURNS integer[]
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(pg_catalog.array_agg(n.node_id ORDER BY n.node_id), '{}')
    FROM pgrelay.nodes n
   WHERE pgrelay._may_adopt(n)
$$;


ALTER FUNCTION pgrelay._adopters() OWNER TO postgres;

--
-- Name: _arm_wakes(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._arm_wakes() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_armed int;
BEGIN
  UPDATE pgrelay.wake_slots w SET armed = true WHERE NOT w.armed;
  GET DIAGNOSTICS v_armed = ROW_COUNT;
  IF v_armed = 0 AND NOT EXISTS (SELECT FROM pgrelay.wake_slots) THEN
    INSERT INTO pgrelay.wake_slots (slot, armed)
    SELECT g.s, true FROM pg_catalog.generate_series(0, 1023) AS g(s)
    ON CONFLICT (slot) DO NOTHING;
    GET DIAGNOSTICS v_armed = ROW_COUNT;
  END IF;
  RETURN v_armed;
END
$$;


ALTER FUNCTION pgrelay._arm_wakes() OWNER TO postgres;

--
-- Name: _backoff(interval, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) RETURNS interval
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT LEAST(p_retry_delay * pg_catalog.power(2, LEAST(GREATEST(p_attempt, 1) - 1, 20)),
               GREATEST(p_retry_delay, interval '1 hour'))
         * (0.8 + 0.4 * pg_catalog.random())
$$;


ALTER FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) OWNER TO postgres;

--
-- Name: _batch_fence(text, bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_mode = 'leader' AND p_term IS NOT NULL
     AND NOT pgrelay._holds_lease(p_term, pg_catalog.clock_timestamp()) THEN
    RAISE EXCEPTION 'pgrelay: the leader lease of term % ended while the batch ran', p_term
      USING ERRCODE = 'PR031';
  END IF;
END
$$;


ALTER FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) OWNER TO postgres;

--
-- Name: _cancel_apply(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cancel_apply(p_origin bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  k pgrelay.cancels;
  v_node int := pgrelay._this_node();
  v_reason text;
  v_n int;
  v_mails bigint[];
  v_mail_channels text[];
BEGIN
  SELECT * INTO k FROM pgrelay.cancels c WHERE c.origin_id = p_origin;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  v_reason := pg_catalog.format('cancelled by %s', k.requested_by);
  WITH del AS (
    DELETE FROM pgrelay.queue q
     WHERE q.id IN (SELECT x.id FROM pgrelay.queue x
                     WHERE ((x.id = p_origin AND x.origin_id = p_origin)
                            OR (x.origin_id = p_origin AND x.retry_of IS NOT NULL))
                       AND x.dispatched_at IS NULL
                       AND pgrelay._cancels_here(x.run_in_node, x.owner_node)
                       FOR UPDATE SKIP LOCKED)
       AND q.dispatched_at IS NULL
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload, q.priority
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT del.id, del.origin_id, del.channel, del.attempt, 'cancelled', v_reason, v_node,
           NULLIF(del.priority, 0)
      FROM del ORDER BY del.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg),
         (SELECT pg_catalog.array_agg(m.n) FROM del JOIN pgrelay.channels c ON c.channel = del.channel,
                 LATERAL (SELECT pgrelay._notification_of(c.kind, del.payload) AS n) m WHERE m.n IS NOT NULL),
         (SELECT pg_catalog.array_agg(del.channel) FROM del JOIN pgrelay.channels c ON c.channel = del.channel
           WHERE pgrelay._notification_of(c.kind, del.payload) IS NOT NULL)
    INTO v_n, v_mails, v_mail_channels;
  IF v_n = 0 THEN
    RETURN false;
  END IF;
  IF v_mails IS NOT NULL THEN
    PERFORM pgrelay_notifier._cancel_for_events(v_mails, v_mail_channels, v_reason);
  END IF;
  DELETE FROM pgrelay.cancels c WHERE c.origin_id = p_origin;
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay._cancel_apply(p_origin bigint) OWNER TO postgres;

--
-- Name: _cancel_email_event(bigint, text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_origin bigint;
BEGIN
  FOR v_origin IN
    SELECT DISTINCT q.origin_id FROM pgrelay.queue q
     WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.payload = p_notification_id::text
    UNION
    SELECT q.origin_id FROM pgrelay.queue q
     WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
       AND q.channel = p_channel AND q.payload = p_notification_id::text
  LOOP
    PERFORM pgrelay._cancel_request(v_origin, p_by);
  END LOOP;
END
$$;


ALTER FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) OWNER TO postgres;

--
-- Name: _cancel_request(bigint, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cancel_request(p_origin bigint, p_by text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  INSERT INTO pgrelay.cancels (origin_id, requested_by) VALUES (p_origin, p_by)
  ON CONFLICT (origin_id) DO NOTHING;
  PERFORM pgrelay._cancel_apply(p_origin);
END
$$;


ALTER FUNCTION pgrelay._cancel_request(p_origin bigint, p_by text) OWNER TO postgres;

--
-- Name: _cancel_sweep(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cancel_sweep() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_origin bigint;
  n int := 0;
BEGIN
  FOR v_origin IN SELECT c.origin_id FROM pgrelay.cancels c ORDER BY c.origin_id LOOP
    IF pgrelay._cancel_apply(v_origin) THEN
      n := n + 1;
    END IF;
  END LOOP;
  DELETE FROM pgrelay.cancels c
   WHERE c.requested_at < pg_catalog.now() - interval '1 hour'
     AND NOT EXISTS (SELECT FROM pgrelay.queue q
                      WHERE (q.id = c.origin_id AND q.origin_id = c.origin_id)
                         OR (q.origin_id = c.origin_id AND q.retry_of IS NOT NULL));
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._cancel_sweep() OWNER TO postgres;

--
-- Name: _cancels_here(integer, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE
    WHEN NOT EXISTS (SELECT FROM pgrelay.nodes n
                      WHERE n.node_id >= 0 AND n.node_id <> pgrelay._this_node() AND n.decommissioned_at IS NULL)
      THEN true
    WHEN p_run_in_node IS NOT NULL THEN p_run_in_node = pgrelay._this_node()
    ELSE COALESCE((SELECT h.leader_node FROM pgrelay._lease_holder(pg_catalog.now()) h), p_owner_node)
         = pgrelay._this_node()
  END
$$;


ALTER FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) OWNER TO postgres;

--
-- Name: _channel_locks_create(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._channel_locks_create() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  INSERT INTO pgrelay.channel_locks (channel, slot)
  SELECT NEW.channel, s.slot FROM pg_catalog.generate_series(0, 63) AS s(slot)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;


ALTER FUNCTION pgrelay._channel_locks_create() OWNER TO postgres;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: channels; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.channels (
    channel text NOT NULL,
    handler text NOT NULL,
    kind text NOT NULL,
    concurrency_mode text DEFAULT 'none'::text NOT NULL,
    deduplicate boolean DEFAULT false NOT NULL,
    node_restricted boolean DEFAULT false NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    retry_delay interval DEFAULT '00:00:01'::interval NOT NULL,
    expire_after interval,
    timeout interval DEFAULT '00:00:30'::interval NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    publish_payload boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    publish_errors text DEFAULT 'class'::text NOT NULL,
    publish_enqueued boolean DEFAULT false NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    max_in_flight integer,
    rate_limit integer,
    rate_period interval,
    store_traces boolean DEFAULT true NOT NULL,
    CONSTRAINT channels_attempts CHECK ((max_attempts > 0)),
    CONSTRAINT channels_expire_after CHECK (((expire_after IS NULL) OR (expire_after > '00:00:00'::interval))),
    CONSTRAINT channels_kind CHECK ((kind = ANY (ARRAY['sql'::text, 'email'::text, 'nats'::text, 'go'::text]))),
    CONSTRAINT channels_max_in_flight CHECK (((max_in_flight IS NULL) OR (max_in_flight > 0))),
    CONSTRAINT channels_mode CHECK ((concurrency_mode = ANY (ARRAY['none'::text, 'channel'::text, 'payload'::text]))),
    CONSTRAINT channels_name CHECK ((channel ~ '^[A-Za-z0-9_-]{1,100}$'::text)),
    CONSTRAINT channels_rate_limit CHECK (((rate_limit IS NULL) OR (rate_limit > 0))),
    CONSTRAINT channels_rate_period CHECK ((((rate_limit IS NULL) = (rate_period IS NULL)) AND ((rate_period IS NULL) OR (rate_period > '00:00:00'::interval)))),
    CONSTRAINT channels_retry_delay CHECK ((retry_delay >= '00:00:00'::interval)),
    CONSTRAINT channels_timeout CHECK ((timeout > '00:00:00'::interval))
);


ALTER TABLE pgrelay.channels OWNER TO postgres;

--
-- Name: _check_channel(pgrelay.channels, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler boolean DEFAULT true) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_stmt text;
  v_types text[];
  old pgrelay.channels;
BEGIN
  IF c.channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay: channel name must not be NULL' USING ERRCODE = 'PR010';
  END IF;
  IF c.channel !~ '^[A-Za-z0-9_-]{1,100}$' THEN
    RAISE EXCEPTION 'pgrelay: channel name % is invalid: use 1 to 100 letters, digits, "_" or "-"',
      pg_catalog.quote_literal(c.channel) USING ERRCODE = 'PR010';
  END IF;
  IF c.kind IS NULL OR c.kind NOT IN ('sql', 'email', 'nats', 'go') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown kind % (expected sql, email, nats or go)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.kind), 'NULL') USING ERRCODE = 'PR011';
  END IF;
  IF c.concurrency_mode IS NULL OR c.concurrency_mode NOT IN ('none', 'channel', 'payload') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown concurrency_mode % (expected none, channel or payload)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.concurrency_mode), 'NULL') USING ERRCODE = 'PR012';
  END IF;
  IF c.max_attempts IS NULL OR c.max_attempts <= 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_attempts must be positive, got %', c.channel,
      COALESCE(c.max_attempts::text, 'NULL') USING ERRCODE = 'PR013';
  END IF;
  IF c.timeout IS NULL OR c.timeout <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: timeout must be positive, got %', c.channel,
      COALESCE(c.timeout::text, 'NULL') USING ERRCODE = 'PR014';
  END IF;
  IF c.retry_delay IS NULL OR c.retry_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: retry_delay must not be negative, got %', c.channel,
      COALESCE(c.retry_delay::text, 'NULL') USING ERRCODE = 'PR015';
  END IF;
  IF c.expire_after IS NOT NULL AND c.expire_after <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay: channel %: expire_after must be positive, got %', c.channel,
      c.expire_after USING ERRCODE = 'PR016';
  END IF;
  -- The upper bounds, for values given anew: not the stored value of the
  -- channel (old is all NULL for a new channel).
  SELECT x.* INTO old FROM pgrelay.channels x WHERE x.channel = c.channel;
  IF c.max_attempts > 1000 AND c.max_attempts IS DISTINCT FROM old.max_attempts THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_attempts must be at most 1000, got %', c.channel,
      c.max_attempts USING ERRCODE = 'PR013';
  END IF;
  IF c.timeout > interval '24 hours' AND c.timeout IS DISTINCT FROM old.timeout THEN
    RAISE EXCEPTION 'pgrelay: channel %: timeout must be at most 24 hours, got %', c.channel,
      c.timeout USING ERRCODE = 'PR014';
  END IF;
  IF c.retry_delay > interval '24 hours' AND c.retry_delay IS DISTINCT FROM old.retry_delay THEN
    RAISE EXCEPTION 'pgrelay: channel %: retry_delay must be at most 24 hours, got %', c.channel,
      c.retry_delay USING ERRCODE = 'PR015';
  END IF;
  IF c.expire_after > interval '365 days' AND c.expire_after IS DISTINCT FROM old.expire_after THEN
    RAISE EXCEPTION 'pgrelay: channel %: expire_after must be at most 365 days, got %', c.channel,
      c.expire_after USING ERRCODE = 'PR016',
      HINT = 'Leave it NULL for events that never expire.';
  END IF;
  IF c.publish_errors IS NULL OR c.publish_errors NOT IN ('class', 'text', 'none') THEN
    RAISE EXCEPTION 'pgrelay: channel %: unknown publish_errors % (expected class, text or none)',
      c.channel, COALESCE(pg_catalog.quote_literal(c.publish_errors), 'NULL') USING ERRCODE = 'PR018';
  END IF;
  IF c.handler IS NULL OR pg_catalog.btrim(c.handler) = '' THEN
    RAISE EXCEPTION 'pgrelay: channel %: handler must not be empty', c.channel USING ERRCODE = 'PR017';
  END IF;
  IF NOT p_check_handler THEN
    RETURN;
  END IF;
  IF c.kind = 'sql' THEN
    -- The handler must prepare as one statement with one text parameter ($1 = payload).
    --
    -- One statement: the text is spliced into a PREPARE below, and a ';' would end
    -- the PREPARE and run whatever follows it, as the owner of register() (a
    -- SECURITY DEFINER function). PostgreSQL only separates statements with ';', so
    -- refusing any ';' but trailing ones is a safe (if conservative) test.
    IF pg_catalog.strpos(pg_catalog.rtrim(c.handler, E' \t\r\n;'), ';') > 0 THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler must be a single statement (no ";" but a trailing one)',
        c.channel USING ERRCODE = 'PR017',
        HINT = 'Write a semicolon inside a string literal as chr(59).';
    END IF;
    v_stmt := 'pgrelay_check_' || pg_catalog.pg_backend_pid();
    -- With $1 declared text, as the contract says.
    BEGIN
      EXECUTE pg_catalog.format('PREPARE %I(text) AS %s', v_stmt, c.handler);
      SELECT p.parameter_types::text[] INTO v_types
        FROM pg_catalog.pg_prepared_statements p WHERE p.name = v_stmt;
      EXECUTE pg_catalog.format('DEALLOCATE %I', v_stmt);
    EXCEPTION WHEN OTHERS THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler does not prepare as one statement with one text parameter ($1): %',
        c.channel, SQLERRM USING ERRCODE = 'PR017', HINT = 'Example: SELECT app.refresh_view($1)';
    END;
    -- A PREPARE with declared types accepts further parameters it can type
    -- ('SELECT $2::int'); the Processor binds exactly one.
    IF v_types IS DISTINCT FROM ARRAY['text'] THEN
      RAISE EXCEPTION 'pgrelay: channel %: handler must take exactly one parameter ($1), it takes % (%)',
        c.channel, COALESCE(pg_catalog.cardinality(v_types), 0), pg_catalog.array_to_string(v_types, ', ')
        USING ERRCODE = 'PR017', HINT = 'Example: SELECT app.refresh_view($1)';
    END IF;
  ELSIF c.kind = 'go' THEN
    -- The name of a Go handler: the program embedding the Processor
    -- registers a function under it (Handle, HandleTx).
    IF c.handler !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,99}$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid Go handler name (1 to 100 letters, digits, "_", "." or "-", starting with a letter or "_")',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Example: charge_card, with Handle("charge_card", ...) in the program.';
    END IF;
  ELSIF c.kind = 'nats' THEN
    IF c.handler !~ '^[^\x01-\x20\x7f.*>]+(\.[^\x01-\x20\x7f.*>]+)*$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: % is not a valid NATS subject (dot-separated tokens, no spaces, control characters or wildcards)',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017';
    END IF;
    IF c.handler ~ '^pgrelay\.' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is under "pgrelay.", where pgrelay publishes its own events',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'The events stream captures pgrelay.>; choose a subject outside it, e.g. app.orders.';
    END IF;
    IF c.handler ~ '^\$' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is reserved: NATS keeps subjects starting with "$" ($JS, $KV, $O, $SYS, ...) for itself',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Choose a subject of the application, e.g. app.orders.';
    END IF;
    IF c.handler ~ '^_INBOX(\.|$)' THEN
      RAISE EXCEPTION 'pgrelay: channel %: subject % is reserved: _INBOX. holds the reply inboxes of NATS clients',
        c.channel, pg_catalog.quote_literal(c.handler) USING ERRCODE = 'PR017',
        HINT = 'Choose a subject of the application, e.g. app.orders.';
    END IF;
  END IF;
END
$_$;


ALTER FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler boolean) OWNER TO postgres;

--
-- Name: _check_flow(text, integer, integer, integer, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._check_flow(p_channel text, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_priority IS NOT NULL AND (p_priority < -32768 OR p_priority > 32767) THEN
    RAISE EXCEPTION 'pgrelay: channel %: priority must be between -32768 and 32767, got %',
      p_channel, p_priority USING ERRCODE = 'PR009';
  END IF;
  IF p_max_in_flight IS NOT NULL AND p_max_in_flight < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: max_in_flight must be positive (0: no limit), got %',
      p_channel, p_max_in_flight USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_limit IS NOT NULL AND p_rate_limit < 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_limit must be positive (0: no limit), got %',
      p_channel, p_rate_limit USING ERRCODE = 'PR019';
  END IF;
  IF p_rate_period IS NOT NULL AND (p_rate_period <= interval '0' OR p_rate_period > interval '1 day') THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period must be positive and at most 1 day, got %',
      p_channel, p_rate_period USING ERRCODE = 'PR019';
  END IF;
END
$$;


ALTER FUNCTION pgrelay._check_flow(p_channel text, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval) OWNER TO postgres;

--
-- Name: _check_notify(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._check_notify(p_channel text) RETURNS pgrelay.channels
    LANGUAGE plpgsql
    AS $$
DECLARE
  ch pgrelay.channels;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  PERFORM pgrelay._lock_channel(p_channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.notify: unknown channel %', pg_catalog.quote_literal(p_channel)
      USING ERRCODE = 'PR001', HINT = 'Register it first with pgrelay.register().';
  END IF;
  RETURN ch;
END
$$;


ALTER FUNCTION pgrelay._check_notify(p_channel text) OWNER TO postgres;

--
-- Name: _check_payload(text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._check_payload(p_channel text, p_payload text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF pgrelay._payload_ok(p_payload) THEN
    RETURN;
  END IF;
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: payload for channel % must not be NULL (use an empty string)',
      pg_catalog.quote_literal(p_channel) USING ERRCODE = 'PR005';
  END IF;
  RAISE EXCEPTION 'pgrelay.notify: payload for channel % is % bytes, over the 1 MiB (1048576 bytes) limit',
    pg_catalog.quote_literal(p_channel), pg_catalog.octet_length(p_payload) USING ERRCODE = 'PR006';
END
$$;


ALTER FUNCTION pgrelay._check_payload(p_channel text, p_payload text) OWNER TO postgres;

--
-- Name: _claim(bigint, text, boolean, integer, text[], bigint, boolean, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[] DEFAULT '{sql}'::text[], p_term bigint DEFAULT NULL::bigint, p_direct boolean DEFAULT false, p_direct_kinds text[] DEFAULT '{}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_left int := p_limit;
  v_nch int;
  v_share int;
  v_n int;
  v_cap int;
  v_pending text[];
  v_full text[] := '{}';
  v_rated text[] := '{}';
  v_pass int;
  v_start bigint;
  v_lanes bigint[];
  v_first bigint[];
  v_limited bool;
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  v_pending := pgrelay._pending_channels();
  SELECT count(*) INTO v_nch FROM pgrelay.channels c
   WHERE c.channel = ANY (v_pending) AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF v_nch = 0 THEN
    RETURN;
  END IF;
  v_share := GREATEST(1, (p_limit + v_nch - 1) / v_nch);

  FOR v_pass IN 1..2 LOOP
    FOR ch IN
      SELECT * FROM pgrelay.channels c
       WHERE c.channel = ANY (v_pending) AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds)
         AND (v_pass = 1 OR c.channel = ANY (v_full))
       ORDER BY c.priority DESC, pg_catalog.random()
    LOOP
      EXIT WHEN v_left <= 0;
      IF ch.rate_limit IS NOT NULL AND v_pass = 1 THEN
        v_rated := v_rated || ch.channel;
      END IF;
      IF ch.concurrency_mode = 'none' THEN
        RETURN QUERY
        SELECT n.*, NULL::bigint
          FROM pgrelay._claim_none(p_processor, ch, v_node, v_all, v_own,
                                   CASE WHEN v_pass = 1 THEN LEAST(v_share, v_left) ELSE v_left END) n;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_left := v_left - v_n;
        IF v_pass = 1 AND v_n >= v_share THEN
          v_full := v_full || ch.channel;
        END IF;
        CONTINUE;
      END IF;

      -- Serialised channels: one lane ('channel') or many ('payload').
      CONTINUE WHEN v_pass = 2;
      v_limited := ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
      v_cap := LEAST(v_share, v_left);
      IF v_limited THEN
        v_cap := pgrelay._claim_allowance(ch, v_node, v_all, v_own, v_cap);
        CONTINUE WHEN v_cap <= 0;
      END IF;
      v_first := '{}';
      IF ch.concurrency_mode = 'channel' THEN
        v_lanes := ARRAY[0::bigint];
      ELSE
        IF pgrelay._claim_prioritised(ch.channel) THEN
          -- The lanes holding the rows of the highest priorities first: their
          -- heads (which may be of another priority) are ordered below.
          SELECT COALESCE(pg_catalog.array_agg(DISTINCT x.lane), '{}') INTO v_first
            FROM (SELECT q.lane FROM pgrelay.queue q
                   WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.priority > 0
                   ORDER BY q.priority DESC, q.not_before, q.id
                   LIMIT 2 * v_share + 8) x
           WHERE x.lane IS NOT NULL;
        END IF;
        -- A loose index scan over the distinct lanes with pending rows, from a
        -- random starting point, wrapping around, visiting a bounded number.
        v_start := ((pg_catalog.random() - 0.5) * 18000000000000000000.0)::numeric::bigint;
        WITH RECURSIVE l(lane) AS (
          (SELECT q.lane FROM pgrelay.queue q
            WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
              AND q.lane >= v_start
            ORDER BY q.lane LIMIT 1)
          UNION ALL
          SELECT (SELECT q.lane FROM pgrelay.queue q
                   WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
                     AND q.lane > l.lane
                   ORDER BY q.lane LIMIT 1)
            FROM l WHERE l.lane IS NOT NULL
        )
        SELECT pg_catalog.array_agg(x.lane) INTO v_lanes
          FROM (SELECT l.lane FROM l WHERE l.lane IS NOT NULL LIMIT 2 * v_share + 8) x;
        IF COALESCE(pg_catalog.cardinality(v_lanes), 0) < 2 * v_share + 8 THEN
          WITH RECURSIVE l(lane) AS (
            (SELECT q.lane FROM pgrelay.queue q
              WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
              ORDER BY q.lane LIMIT 1)
            UNION ALL
            SELECT (SELECT q.lane FROM pgrelay.queue q
                     WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.lane IS NOT NULL
                       AND q.lane > l.lane AND q.lane < v_start
                     ORDER BY q.lane LIMIT 1)
              FROM l WHERE l.lane IS NOT NULL
          )
          SELECT COALESCE(v_lanes, '{}') || COALESCE(pg_catalog.array_agg(x.lane), '{}') INTO v_lanes
            FROM (SELECT l.lane FROM l WHERE l.lane IS NOT NULL AND l.lane < v_start
                   LIMIT 2 * v_share + 8 - COALESCE(pg_catalog.cardinality(v_lanes), 0)) x;
        END IF;
        IF pg_catalog.cardinality(v_first) > 0 THEN
          -- Priority chooses among the lanes' heads; each lane stays FIFO.
          SELECT pg_catalog.array_agg(y.lane ORDER BY y.priority DESC, y.origin_id, y.id) INTO v_lanes
            FROM pg_catalog.unnest((SELECT pg_catalog.array_agg(DISTINCT u.lane)
                                      FROM pg_catalog.unnest(v_first || COALESCE(v_lanes, '{}')) u(lane))) l(lane)
            CROSS JOIN LATERAL pgrelay._lane_head(ch.channel, l.lane, v_node, v_all, v_own) h
            CROSS JOIN LATERAL (
              SELECT l.lane, q.priority, q.origin_id, q.id FROM pgrelay.queue q
               WHERE q.id = h.id LIMIT 1) y;
        END IF;
      END IF;

      -- The lanes' heads in the order of v_lanes, in one statement: each
      -- head is a LATERAL subquery with its own LIMIT and lock, so the plan
      -- takes the lanes in order and locks only a head it claims, read by its
      -- id alone ((...) IS TRUE is a filter, never an index condition, as in
      -- _claim_lanes_direct). The head
      -- itself, never the next row: a head a producer holds (it absorbed a
      -- notify) leaves the lane for the next claim.
      RETURN QUERY
      WITH locked AS (
        SELECT h.id, l.ord
          FROM pg_catalog.unnest(COALESCE(v_lanes, '{}')) WITH ORDINALITY l(lane, ord)
         CROSS JOIN LATERAL pgrelay._lane_head(ch.channel, l.lane, v_node, v_all, v_own) hd
         CROSS JOIN LATERAL (
           SELECT q.id FROM pgrelay.queue q
            WHERE q.id = hd.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
            LIMIT 1
              FOR UPDATE OF q SKIP LOCKED) h
         LIMIT v_cap
      ), upd AS (
        UPDATE pgrelay.queue q
           SET dispatched_at = now(), dispatched_by = p_processor
          FROM locked
         WHERE q.id = locked.id
        RETURNING q.*, locked.ord AS ord
      )
      SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
             u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
             ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
             ch.max_attempts, NULL::bigint
        FROM upd u
       ORDER BY u.ord;
      GET DIAGNOSTICS v_n = ROW_COUNT;
      IF ch.rate_limit IS NOT NULL THEN
        PERFORM pgrelay._claim_started(ch.channel, v_n);
      END IF;
      v_left := v_left - v_n;
    END LOOP;
    EXIT WHEN v_left <= 0 OR pg_catalog.cardinality(v_full) = 0;
  END LOOP;
  IF pg_catalog.cardinality(v_rated) > 0 THEN
    RETURN QUERY SELECT * FROM pgrelay._claim_rate_rows(v_rated, v_node, v_all, v_own);
  END IF;
END
$$;


ALTER FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) OWNER TO postgres;

--
-- Name: _claim_allowance(pgrelay.channels, integer, boolean, boolean, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_n int := p_want;
  v_busy bigint;
  v_started bigint;
BEGIN
  IF ch.max_in_flight IS NULL AND ch.rate_limit IS NULL OR p_want <= 0 THEN
    RETURN p_want;
  END IF;
  PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO pgrelay.flow_locks (channel) VALUES (ch.channel) ON CONFLICT DO NOTHING;
    PERFORM FROM pgrelay.flow_locks l WHERE l.channel = ch.channel FOR UPDATE;
  END IF;
  IF ch.max_in_flight IS NOT NULL THEN
    -- A loose index scan over the Processors with rows in flight
    -- (queue_inflight), then the channel's rows of each.
    WITH RECURSIVE d(p) AS (
      (SELECT q.dispatched_by FROM pgrelay.queue q
        WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by IS NOT NULL
        ORDER BY q.dispatched_by LIMIT 1)
      UNION ALL
      SELECT (SELECT q.dispatched_by FROM pgrelay.queue q
               WHERE q.dispatched_at IS NOT NULL AND q.dispatched_by > d.p
               ORDER BY q.dispatched_by LIMIT 1)
        FROM d WHERE d.p IS NOT NULL
    )
    SELECT count(*) INTO v_busy
      FROM d JOIN pgrelay.queue q ON q.dispatched_by = d.p
     WHERE q.channel = ch.channel AND q.dispatched_at IS NOT NULL
       AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own);
    v_n := LEAST(v_n, GREATEST(0, ch.max_in_flight - v_busy)::int);
  END IF;
  IF ch.rate_limit IS NOT NULL AND v_n > 0 THEN
    -- Starts are timed as their claims are (dispatched_at): now(), the
    -- claim transaction's start. A claim counts every start it can see
    -- within the period before its own time; those of a claim that began
    -- earlier but took the lock later count too. The rows are kept a minute
    -- longer than the period, for a claim that waited that long for the lock.
    DELETE FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at < now() - ch.rate_period - interval '1 minute';
    SELECT COALESCE(sum(s.n), 0) INTO v_started FROM pgrelay.flow_starts s
     WHERE s.channel = ch.channel AND s.started_at > now() - ch.rate_period;
    v_n := LEAST(v_n, GREATEST(0, ch.rate_limit - v_started)::int);
  END IF;
  RETURN v_n;
END
$$;


ALTER FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) OWNER TO postgres;

--
-- Name: _claim_channel(bigint, text, boolean, integer, text, text[], bigint, boolean, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint DEFAULT NULL::bigint, p_direct boolean DEFAULT false, p_direct_kinds text[] DEFAULT '{}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_all bool;
  v_own bool;
  v_node int := pgrelay._this_node();
  ch pgrelay.channels;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.concurrency_mode = 'none'
     AND pgrelay._claim_visits(c, p_kinds, p_direct, p_direct_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT n.*, NULL::bigint FROM pgrelay._claim_none(p_processor, ch, v_node, v_all, v_own, p_limit) n;
  IF ch.rate_limit IS NOT NULL THEN
    RETURN QUERY SELECT * FROM pgrelay._claim_rate_rows(ARRAY[ch.channel], v_node, v_all, v_own);
  END IF;
END
$$;


ALTER FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) OWNER TO postgres;

--
-- Name: _claim_direct(text, text, boolean, bigint, integer, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[] DEFAULT '{sql}'::text[]) RETURNS TABLE(id bigint, origin_id bigint, payload text, attempt integer, enqueued_at timestamp with time zone, expired boolean, handler text, timeout_ms bigint, max_attempts integer, kind text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  ch pgrelay.channels;
  v_timeout_ms bigint;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  SELECT * INTO ch FROM pgrelay.channels c
   WHERE c.channel = p_channel AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT FOUND OR p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  v_timeout_ms := (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint;
  IF pgrelay._claim_prioritised(p_channel) THEN
    RETURN QUERY
    SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
           ch.handler, v_timeout_ms, ch.max_attempts, ch.kind
      FROM pgrelay.queue q
     WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(p_channel, v_node, v_all, v_own, p_limit)))
     ORDER BY q.priority DESC, q.not_before, q.id;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id, q.origin_id, q.payload, q.attempt, q.enqueued_at, COALESCE(q.expires_at <= now(), false),
         ch.handler, v_timeout_ms, ch.max_attempts, ch.kind
    FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
   ORDER BY q.not_before, q.id
   LIMIT p_limit
     FOR UPDATE OF q SKIP LOCKED;
END
$$;


ALTER FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[]) OWNER TO postgres;

--
-- Name: _claim_kind(text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN (p_kind = 'go'::text) THEN ('go:'::text || p_handler) ELSE p_kind END;


ALTER FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) OWNER TO postgres;

--
-- Name: _claim_lanes_direct(text, boolean, bigint, integer, text, bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) RETURNS TABLE(id bigint, origin_id bigint, channel text, lane bigint, payload text, attempt integer, enqueued_at timestamp with time zone, expired boolean, handler text, timeout_ms bigint, max_attempts integer)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_lane bigint := COALESCE(p_after_lane, -9223372036854775808);
  v_n int := 0;
  v_got int;
  v_taken bigint[] := '{}';
  v_prio text[];
  v_sign int;
  v_lo smallint;
  v_hi smallint;
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) s;
  IF p_limit IS NULL OR p_limit <= 0 THEN
    RETURN;
  END IF;
  -- The channels with rows of a priority other than 0: a loose index scan
  -- over queue_priority, one probe per channel found.
  v_prio := ARRAY(
    WITH RECURSIVE pc(channel) AS (
      (SELECT q.channel FROM pgrelay.queue q
        WHERE q.dispatched_at IS NULL AND q.priority <> 0
        ORDER BY q.channel LIMIT 1)
      UNION ALL
      SELECT (SELECT q.channel FROM pgrelay.queue q
               WHERE q.dispatched_at IS NULL AND q.priority <> 0 AND q.channel > pc.channel
               ORDER BY q.channel LIMIT 1)
        FROM pc WHERE pc.channel IS NOT NULL)
    SELECT pc.channel FROM pc WHERE pc.channel IS NOT NULL);

  FOREACH v_sign IN ARRAY ARRAY[1, 0, -1] LOOP
    EXIT WHEN v_n >= p_limit;
    IF v_sign <> 0 THEN
      CONTINUE WHEN pg_catalog.cardinality(v_prio) = 0;
      v_lo := CASE WHEN v_sign > 0 THEN 1 ELSE -32768 END;
      v_hi := CASE WHEN v_sign > 0 THEN 32767 ELSE -1 END;
      -- The heads of a priority above (below) 0: the lanes holding the
      -- channels' rows of that sign, a bounded number, and their heads of
      -- that sign in priority order. Each is locked, ready, or passed over.
      -- One statement: each head is a LATERAL subquery with its own LIMIT
      -- and lock, taken in priority order.
      FOR id, origin_id, channel, lane, payload, attempt, enqueued_at, expired, handler, timeout_ms, max_attempts IN
        SELECT h.*
          FROM (SELECT y.id, c.handler, c.timeout, c.max_attempts
                  FROM pgrelay.channels c
                 CROSS JOIN LATERAL (
                   SELECT DISTINCT x.lane
                     FROM (SELECT q.lane FROM pgrelay.queue q
                            WHERE q.channel = c.channel AND q.dispatched_at IS NULL
                              AND q.priority <> 0 AND q.priority BETWEEN v_lo AND v_hi
                            ORDER BY q.priority DESC, q.not_before, q.id
                            LIMIT p_limit) x
                    WHERE x.lane IS NOT NULL) l
                 CROSS JOIN LATERAL pgrelay._lane_head(c.channel, l.lane, v_node, v_all, v_own) hd
                 CROSS JOIN LATERAL (
                   SELECT y.id, y.priority, y.origin_id FROM pgrelay.queue y
                    WHERE y.id = hd.id AND y.priority BETWEEN v_lo AND v_hi AND y.id <> ALL (v_taken)
                    LIMIT 1) y
                 WHERE c.channel = ANY (v_prio) AND c.kind = 'sql' AND NOT c.paused
                   AND c.concurrency_mode IN ('channel', 'payload')
                   AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
                 ORDER BY y.priority DESC, c.priority DESC, y.origin_id, y.id) hp
         CROSS JOIN LATERAL (
           SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
                  COALESCE(q.expires_at <= now(), false), hp.handler,
                  (EXTRACT(epoch FROM hp.timeout) * 1000)::bigint, hp.max_attempts
             FROM pgrelay.queue q
            WHERE q.id = hp.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
            LIMIT 1
              FOR UPDATE OF q SKIP LOCKED) h
         LIMIT p_limit - v_n
      LOOP
        v_n := v_n + 1;
        v_taken := v_taken || id;
        RETURN NEXT;
      END LOOP;
      CONTINUE;
    END IF;

    -- The walk: one statement, a loose index scan over queue_lane (one
    -- probe per lane, however long the lanes are) that goes on from the
    -- start once it passes the last lane, up to where it began. w's first
    -- row is where the walk stands, not a lane (OFFSET 1). Bounded, so a
    -- queue full of lanes this batch cannot serve costs a bounded claim.
    -- Each lane's head is a LATERAL subquery with its own LIMIT and lock, so
    -- the plan takes the lanes in the walk's order and locks only a head it
    -- returns. Its row is read by the id alone: the ready test is written
    -- (...) IS TRUE, a filter and never an index condition, so no plan (one
    -- cached on a small queue included) reads queue_ready for each lane. A head taken above is this transaction's (SKIP LOCKED does not pass
    -- over its own locks); one of a priority below 0 waits for the end.
    RETURN QUERY
    WITH RECURSIVE w(channel, lane, wrapped) AS (
      SELECT p_after_channel, v_lane, false
      UNION ALL
      SELECT n.channel, n.lane, n.wrapped
        FROM w CROSS JOIN LATERAL (
          (SELECT q.channel, q.lane, w.wrapped FROM pgrelay.queue q
            WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND (q.channel, q.lane) > (w.channel, w.lane)
            ORDER BY q.channel, q.lane LIMIT 1)
          UNION ALL
          (SELECT q.channel, q.lane, true FROM pgrelay.queue q
            WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND NOT w.wrapped
            ORDER BY q.channel, q.lane LIMIT 1)
          LIMIT 1) n
       WHERE NOT (n.wrapped AND p_after_channel IS NOT NULL AND (n.channel, n.lane) > (p_after_channel, v_lane))
    )
    SELECT h.*
      FROM (SELECT w.channel, w.lane FROM w OFFSET 1 LIMIT 4 * p_limit + 64) l
     CROSS JOIN LATERAL pgrelay._lane_head(l.channel, l.lane, v_node, v_all, v_own) hd
     CROSS JOIN LATERAL (
       SELECT q.id, q.origin_id, q.channel, q.lane, q.payload, q.attempt, q.enqueued_at,
              COALESCE(q.expires_at <= now(), false), c.handler,
              (EXTRACT(epoch FROM c.timeout) * 1000)::bigint, c.max_attempts
         FROM pgrelay.channels c, pgrelay.queue q
        WHERE c.channel = l.channel AND c.kind = 'sql' AND NOT c.paused
          AND c.concurrency_mode IN ('channel', 'payload')
          AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
          AND q.id = hd.id AND (q.not_before <= now()) IS TRUE AND q.dispatched_at IS NULL
          AND q.priority >= 0 AND q.id <> ALL (v_taken)
        LIMIT 1
          FOR UPDATE OF q SKIP LOCKED) h
     LIMIT p_limit - v_n;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    v_n := v_n + v_got;
  END LOOP;
END
$$;


ALTER FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) OWNER TO postgres;

--
-- Name: _claim_none(bigint, pgrelay.channels, integer, boolean, boolean, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_limited bool := ch.max_in_flight IS NOT NULL OR ch.rate_limit IS NOT NULL;
  v_limit int := p_limit;
  v_got int;
BEGIN
  IF v_limited THEN
    v_limit := pgrelay._claim_allowance(ch, p_node, p_all, p_own, p_limit);
    IF v_limit <= 0 THEN
      RETURN;
    END IF;
  END IF;
  IF NOT pgrelay._claim_prioritised(ch.channel) THEN
    RETURN QUERY
    WITH cand AS (
      SELECT q.id
        FROM pgrelay.queue q
       WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
         AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
       ORDER BY q.not_before, q.id
       LIMIT v_limit
       FOR UPDATE SKIP LOCKED
    ), upd AS (
      -- By primary key whatever the plan: a join with cand in a generic plan
      -- (which guesses LIMIT at a tenth of the channel) hashes a scan of the
      -- whole queue.
      UPDATE pgrelay.queue q
         SET dispatched_at = now(), dispatched_by = p_processor
       WHERE q.id = ANY (ARRAY(SELECT cand.id FROM cand))
      RETURNING q.*
    )
    SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
           u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
           ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
           ch.max_attempts
      FROM upd u
     ORDER BY u.not_before, u.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
  ELSE
    RETURN QUERY
    WITH upd AS (
      UPDATE pgrelay.queue q
         SET dispatched_at = now(), dispatched_by = p_processor
       WHERE q.id = ANY (ARRAY(SELECT pgrelay._claim_pick(ch.channel, p_node, p_all, p_own, v_limit)))
      RETURNING q.*
    )
    SELECT u.id, u.origin_id, u.channel, u.payload, u.attempt, u.enqueued_at,
           u.dispatched_at, COALESCE(u.expires_at <= now(), false), ch.kind, ch.handler,
           ch.concurrency_mode, (EXTRACT(epoch FROM ch.timeout) * 1000)::bigint,
           ch.max_attempts
      FROM upd u
     ORDER BY u.priority DESC, u.not_before, u.id;
    GET DIAGNOSTICS v_got = ROW_COUNT;
  END IF;
  IF ch.rate_limit IS NOT NULL THEN
    PERFORM pgrelay._claim_started(ch.channel, v_got);
  END IF;
END
$$;


ALTER FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) OWNER TO postgres;

--
-- Name: _claim_pick(text, integer, boolean, boolean, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) RETURNS SETOF bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_left int := p_limit;
  v_n int;
BEGIN
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority > 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.not_before <= now() AND q.priority = 0
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_left := v_left - v_n;
  IF v_left <= 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT q.id FROM pgrelay.queue q
   WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority < 0 AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)
   ORDER BY q.priority DESC, q.not_before, q.id
   LIMIT v_left
     FOR UPDATE SKIP LOCKED;
END
$$;


ALTER FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) OWNER TO postgres;

--
-- Name: _claim_prioritised(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_prioritised(p_channel text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgrelay.queue q
                  WHERE q.channel = p_channel AND q.dispatched_at IS NULL AND q.priority <> 0);
END
$$;


ALTER FUNCTION pgrelay._claim_prioritised(p_channel text) OWNER TO postgres;

--
-- Name: _claim_rate_rows(text[], integer, boolean, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) RETURNS TABLE(id bigint, origin_id bigint, channel text, payload text, attempt integer, enqueued_at timestamp with time zone, dispatched_at timestamp with time zone, expired boolean, kind text, handler text, concurrency_mode text, timeout_ms bigint, max_attempts integer, rate_wait_ms bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT NULL::bigint, NULL::bigint, c.channel, NULL::text, NULL::integer, NULL::timestamptz,
         NULL::timestamptz, NULL::boolean, c.kind, c.handler, c.concurrency_mode, NULL::bigint,
         NULL::integer, w.ms
    FROM pgrelay.channels c
   CROSS JOIN LATERAL (SELECT pgrelay._claim_rate_wait(c, p_node, p_all, p_own) AS ms) w
   WHERE c.channel = ANY (p_channels) AND w.ms IS NOT NULL;
END
$$;


ALTER FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) OWNER TO postgres;

--
-- Name: _claim_rate_wait(pgrelay.channels, integer, boolean, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_at timestamptz;
BEGIN
  IF ch.rate_limit IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT w.started_at + ch.rate_period INTO v_at
    FROM (SELECT s.started_at,
                 pg_catalog.sum(s.n) OVER (ORDER BY s.started_at ROWS UNBOUNDED PRECEDING) AS upto,
                 pg_catalog.sum(s.n) OVER () AS total
            FROM pgrelay.flow_starts s
           WHERE s.channel = ch.channel AND s.started_at > pg_catalog.now() - ch.rate_period) w
   WHERE w.total >= ch.rate_limit AND w.total - w.upto < ch.rate_limit
   ORDER BY w.started_at
   LIMIT 1;
  IF v_at IS NULL OR NOT EXISTS (
       SELECT FROM pgrelay.queue q
        WHERE q.channel = ch.channel AND q.dispatched_at IS NULL AND q.not_before <= v_at
          AND pgrelay._may_take(q.run_in_node, q.owner_node, p_node, p_all, p_own)) THEN
    RETURN NULL;
  END IF;
  RETURN GREATEST(0, pg_catalog.ceil(EXTRACT(epoch FROM v_at - pg_catalog.clock_timestamp()) * 1000))::bigint;
END
$$;


ALTER FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) OWNER TO postgres;

--
-- Name: _claim_scope(text, boolean, bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_mode IS NULL OR p_mode NOT IN ('single', 'multi-node', 'leader') THEN
    RAISE EXCEPTION 'pgrelay: unknown mode %', COALESCE(pg_catalog.quote_literal(p_mode), 'NULL') USING ERRCODE = 'PR021';
  END IF;
  all_rows := p_mode = 'single'
              OR (p_mode = 'leader' AND COALESCE(p_leader, false)
                  AND (p_term IS NULL OR pgrelay._holds_lease(p_term, now())));
  own_rows := p_mode = 'multi-node';
END
$$;


ALTER FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) OWNER TO postgres;

--
-- Name: flow_starts; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE UNLOGGED TABLE pgrelay.flow_starts (
    channel text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    n integer NOT NULL,
    CONSTRAINT flow_starts_n_check CHECK ((n > 0))
);


ALTER TABLE pgrelay.flow_starts OWNER TO postgres;

--
-- Name: _claim_started(text, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_started(p_channel text, p_n integer) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    BEGIN ATOMIC
 INSERT INTO pgrelay.flow_starts (channel, started_at, n)  SELECT _claim_started.p_channel AS p_channel,
             now() AS now,
             _claim_started.p_n AS p_n
           WHERE (_claim_started.p_n > 0);
END;


ALTER FUNCTION pgrelay._claim_started(p_channel text, p_n integer) OWNER TO postgres;

--
-- Name: _claim_visits(pgrelay.channels, text[], boolean, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((NOT (c).paused) AND (pgrelay._claim_kind((c).kind, (c).handler) = ANY (p_kinds)) AND (((c).max_in_flight IS NOT NULL) OR ((c).rate_limit IS NOT NULL) OR ((NOT (p_direct AND ((c).kind = 'sql'::text))) AND (NOT COALESCE((((c).concurrency_mode = 'none'::text) AND (pgrelay._claim_kind((c).kind, (c).handler) = ANY (p_direct_kinds))), false)))));


ALTER FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]) OWNER TO postgres;

--
-- Name: _complete(bigint, bigint[], timestamp with time zone[], text[], text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT o.done FROM pgrelay._complete_outcomes(p_processor, p_ids, p_claimed_at, p_events, p_errors) o
$$;


ALTER FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) OWNER TO postgres;

--
-- Name: _complete_outcomes(bigint, bigint[], timestamp with time zone[], text[], text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_released int;
  v_done int;
  v_mails bigint[];
  v_mail_channels text[];
BEGIN
  -- Successes alone, nearly every batch: their rows are deleted and logged;
  -- nothing to release, retry or bury. The general statement below does the
  -- same for them, at about 200 µs more a call to start and run (a
  -- transaction per event's _succeed paid that for each event). The guards
  -- are tested as num_nulls() and IS TRUE so that the planner cannot match
  -- them to queue_ready's predicate (dispatched_at IS NULL) or to
  -- queue_inflight: plans made on a small queue walked that whole index
  -- instead of the ids' keys, and a claimed success's walked every claim of
  -- the processor, rescanning the ids for each (TestExplainCompletePlans,
  -- TestClaimedSuccessOnlyDeletesAndLogs). Two statements, not one with two
  -- deletes: a direct batch's rows then passed through one more tuplestore.
  IF 'succeeded' = ALL (p_events)
     AND (p_errors IS NULL OR pg_catalog.cardinality(pg_catalog.array_remove(p_errors, NULL)) = 0) THEN
    IF p_processor IS NULL THEN
      -- A direct batch's rows: unclaimed, locked in the caller's transaction.
      WITH del AS (
        DELETE FROM pgrelay.queue q
         WHERE q.id = ANY (p_ids) AND pg_catalog.num_nulls(q.dispatched_at) = 1
        RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority
      ), ids AS (
        SELECT pgrelay._next_ids((SELECT count(*) FROM del)::int) AS a
      )
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', v_node,
             NULLIF(x.priority, 0)
        FROM (SELECT del.*, pg_catalog.row_number() OVER (ORDER BY del.id) AS rn FROM del) x, ids
       ORDER BY x.id;
    ELSE
      -- Claimed rows: each still p_processor's claim of p_claimed_at[i].
      WITH del AS (
        DELETE FROM pgrelay.queue q
         USING ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_claimed_at)) AS o(id, claimed_at)
         WHERE q.id = o.id AND (q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at) IS TRUE
        RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority
      ), ids AS (
        SELECT pgrelay._next_ids((SELECT count(*) FROM del)::int) AS a
      )
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', v_node,
             NULLIF(x.priority, 0)
        FROM (SELECT del.*, pg_catalog.row_number() OVER (ORDER BY del.id) AS rn FROM del) x, ids
       ORDER BY x.id;
    END IF;
    GET DIAGNOSTICS done = ROW_COUNT;
    gave_up := '{}';
    RETURN;
  END IF;

  -- Only when there is something to release: the planner, which expects one
  -- row of the processor's in flight, would join every one of them (often
  -- ~1000) with the whole batch.
  v_released := 0;
  IF 'release' = ANY (p_events) THEN
    WITH o AS (
      SELECT * FROM unnest(p_ids, p_claimed_at, p_events) AS o(id, claimed_at, event)
       WHERE o.event = 'release'
    ), rel AS (
      UPDATE pgrelay.queue q
         SET dispatched_at = NULL, dispatched_by = NULL
        FROM o
       WHERE q.id = o.id AND q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at
      RETURNING q.id
    )
    SELECT count(*) INTO v_released FROM rel;
  END IF;

  WITH o AS (
    SELECT * FROM unnest(p_ids, p_claimed_at, p_events, p_errors)
             AS o(id, claimed_at, event, error)
     WHERE o.event <> 'release'
  ), del AS (
    DELETE FROM pgrelay.queue q
     USING o
     WHERE q.id = o.id
       AND CASE WHEN p_processor IS NULL THEN q.dispatched_at IS NULL
                ELSE q.dispatched_by = p_processor AND q.dispatched_at = o.claimed_at END
    -- What a retry or a dead letter takes from the row, only for an
    -- outcome that can make one.
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.priority, o.event AS o_event, o.error AS o_error,
              CASE WHEN o.event <> 'succeeded' THEN q.payload END AS payload,
              CASE WHEN o.event <> 'succeeded' THEN q.enqueued_at END AS enqueued_at,
              CASE WHEN o.event <> 'succeeded' THEN q.expires_at END AS expires_at,
              CASE WHEN o.event <> 'succeeded' THEN q.run_in_node END AS run_in_node,
              CASE WHEN o.event <> 'succeeded' THEN q.enqueued_by END AS enqueued_by,
              CASE WHEN o.event <> 'succeeded' THEN q.snoozes END AS snoozes
  ), d AS (
    -- The channel's attempts, read for a failure only; a cancel request,
    -- for a failure or a give-up only.
    SELECT del.*,
           CASE WHEN del.o_event IN ('failed', 'gave_up')
                 AND EXISTS (SELECT FROM pgrelay.cancels k WHERE k.origin_id = del.origin_id)
                THEN 'cancelled'
                WHEN del.o_event = 'failed'
                 AND del.attempt >= COALESCE((SELECT c.max_attempts FROM pgrelay.channels c
                                               WHERE c.channel = del.channel), 0)
                THEN 'gave_up' ELSE del.o_event END AS final
      FROM del
  ), ids AS (
    SELECT pgrelay._next_ids((SELECT count(*) FROM d)::int) AS a
  ), lg AS (
    INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, x.final,
           CASE WHEN x.o_error IS NULL THEN NULL ELSE pg_catalog.left(x.o_error, 8000) END, v_node,
           NULLIF(x.priority, 0)
      FROM (SELECT d.*, pg_catalog.row_number() OVER (ORDER BY d.id) AS rn FROM d) x, ids
     ORDER BY x.id
    RETURNING 1
  ), rt AS (
    INSERT INTO pgrelay.queue (origin_id, channel, payload, attempt, retry_of, enqueued_at,
                               not_before, expires_at, priority, enqueued_by, snoozes)
    SELECT d.origin_id, d.channel, d.payload, d.attempt + 1, d.id, d.enqueued_at,
           now() + pgrelay._backoff(c.retry_delay, d.attempt), d.expires_at, d.priority, d.enqueued_by, d.snoozes
      FROM d JOIN pgrelay.channels c ON c.channel = d.channel
     WHERE d.final = 'failed' AND c.retry_delay IS NOT NULL
     ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt,
           CASE WHEN d.o_error IS NULL THEN NULL ELSE pg_catalog.left(d.o_error, 8000) END, d.final,
           pg_catalog.clock_timestamp(), v_node, d.run_in_node, pgrelay._notification_of(c.kind, d.payload),
           NULLIF(d.priority, 0)
      FROM d LEFT JOIN pgrelay.channels c ON c.channel = d.channel
     WHERE d.final IN ('gave_up', 'expired')
     ORDER BY d.id
    RETURNING 1
  ), kc AS (
    -- The requests of the events that ended cancelled.
    DELETE FROM pgrelay.cancels k
     WHERE k.origin_id IN (SELECT d.origin_id FROM d WHERE d.final = 'cancelled')
    RETURNING 1
  ), mails AS (
    SELECT m.n, d.channel
      FROM d JOIN pgrelay.channels c ON c.channel = d.channel,
           LATERAL (SELECT pgrelay._notification_of(c.kind, d.payload) AS n) m
     WHERE d.final = 'cancelled' AND m.n IS NOT NULL
  )
  SELECT (SELECT count(*) FROM lg),
         COALESCE((SELECT pg_catalog.array_agg(d.id ORDER BY d.id) FROM d WHERE d.final = 'gave_up'), '{}'),
         (SELECT pg_catalog.array_agg(mails.n) FROM mails),
         (SELECT pg_catalog.array_agg(mails.channel) FROM mails)
    INTO v_done, gave_up, v_mails, v_mail_channels;

  IF v_mails IS NOT NULL THEN
    PERFORM pgrelay_notifier._cancel_for_events(v_mails, v_mail_channels, 'cancelled: its event was cancelled');
  END IF;
  done := v_released + v_done;
END
$$;


ALTER FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) OWNER TO postgres;

--
-- Name: _cron_error(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cron_error(p_cron text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_fields text[];
  v_min constant int[] := '{0,0,1,1,0}';
  v_max constant int[] := '{59,23,31,12,6}';
  v_name constant text[] := '{minute,hour,day of month,month,day of week}';
  v_item text;
  v_m text[];
  v_lo int;
  v_hi int;
BEGIN
  IF p_cron IS NULL THEN
    RETURN 'the expression is NULL';
  END IF;
  IF p_cron IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') THEN
    RETURN NULL;
  END IF;
  IF p_cron ~ '^@every' THEN
    RETURN '@every is not a cron expression here: give the interval as p_every';
  ELSIF p_cron ~ '^@' THEN
    RETURN 'unknown descriptor (one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)';
  ELSIF p_cron ~ '^[ \t]*(CRON_)?TZ=' THEN
    RETURN 'give the time zone as p_timezone, not in the expression';
  END IF;
  IF p_cron !~ '^[ \t]*[^ \t]+([ \t]+[^ \t]+)*[ \t]*$' THEN
    RETURN 'fields are separated by spaces or tabs';
  END IF;
  v_fields := pg_catalog.regexp_split_to_array(pg_catalog.btrim(p_cron, E' \t'), E'[ \t]+');
  IF pg_catalog.cardinality(v_fields) <> 5 THEN
    RETURN pg_catalog.format('expected exactly 5 fields (minute hour day-of-month month day-of-week), found %s',
                             pg_catalog.cardinality(v_fields));
  END IF;
  FOR i IN 1 .. 5 LOOP
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(v_fields[i], ',') LOOP
      v_m := pg_catalog.regexp_match(v_item, '^(?:([*?])|([A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?)(?:/([0-9]{1,9}))?$');
      IF v_m IS NULL THEN
        RETURN pg_catalog.format('%s field: %L is not *, a value, a range a-b, or one of those with /step',
                                 v_name[i], v_item);
      END IF;
      IF v_m[1] IS NOT NULL THEN
        v_lo := v_min[i];
        v_hi := v_max[i];
      ELSE
        v_lo := pgrelay._cron_value(v_m[2], i);
        v_hi := CASE WHEN v_m[3] IS NOT NULL THEN pgrelay._cron_value(v_m[3], i)
                     WHEN v_m[4] IS NOT NULL THEN v_max[i]
                     ELSE v_lo END;
        IF v_lo IS NULL OR v_hi IS NULL THEN
          RETURN pg_catalog.format('%s field: %L has a value that is neither a number nor a name of the field',
                                   v_name[i], v_item);
        END IF;
      END IF;
      IF v_lo < v_min[i] OR v_hi > v_max[i] THEN
        RETURN pg_catalog.format('%s field: %L is outside %s-%s', v_name[i], v_item, v_min[i], v_max[i]);
      END IF;
      IF v_lo > v_hi THEN
        RETURN pg_catalog.format('%s field: %L begins after it ends', v_name[i], v_item);
      END IF;
      IF v_m[4] IS NOT NULL AND v_m[4]::int = 0 THEN
        RETURN pg_catalog.format('%s field: %L has a step of 0', v_name[i], v_item);
      END IF;
    END LOOP;
  END LOOP;
  RETURN NULL;
END
$_$;


ALTER FUNCTION pgrelay._cron_error(p_cron text) OWNER TO postgres;

--
-- Name: _cron_value(text, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._cron_value(p_token text, p_field integer) RETURNS integer
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  SELECT CASE
    WHEN p_token ~ '^[0-9]{1,9}$' THEN p_token::int
    WHEN p_field = 4 THEN pg_catalog.array_position(
      '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}'::text[], pg_catalog.lower(p_token))
    WHEN p_field = 5 THEN pg_catalog.array_position(
      '{sun,mon,tue,wed,thu,fri,sat}'::text[], pg_catalog.lower(p_token)) - 1
  END
$_$;


ALTER FUNCTION pgrelay._cron_value(p_token text, p_field integer) OWNER TO postgres;

--
-- Name: _default_cluster_name(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._default_cluster_name() RETURNS text
    LANGUAGE sql STABLE
    RETURN COALESCE(NULLIF("left"(regexp_replace(regexp_replace((current_database())::text, '[^A-Za-z0-9._-]'::text, '-'::text, 'g'::text), '^[^A-Za-z0-9]+'::text, ''::text), 63), ''::text), 'pgrelay'::text);


ALTER FUNCTION pgrelay._default_cluster_name() OWNER TO postgres;

--
-- Name: dead_letters; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.dead_letters (
    id bigint NOT NULL,
    origin_id bigint NOT NULL,
    channel text NOT NULL,
    payload text NOT NULL,
    attempts integer NOT NULL,
    last_error text,
    outcome text NOT NULL,
    ended_at timestamp with time zone NOT NULL,
    node integer NOT NULL,
    run_in_node integer,
    notification_id bigint,
    priority smallint,
    CONSTRAINT dead_letters_outcome CHECK ((outcome = ANY (ARRAY['gave_up'::text, 'expired'::text])))
);


ALTER TABLE pgrelay.dead_letters OWNER TO postgres;

--
-- Name: _discarded(pgrelay.dead_letters); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._discarded(dl pgrelay.dead_letters) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
  VALUES (dl.id, dl.origin_id, dl.channel, dl.attempts, 'discarded',
          pg_catalog.format('discarded by %s: dead letter %s (%s after %s attempts)',
                            session_user, dl.id, dl.outcome, dl.attempts),
          NULLIF(dl.priority, 0));
$$;


ALTER FUNCTION pgrelay._discarded(dl pgrelay.dead_letters) OWNER TO postgres;

--
-- Name: _due(timestamp with time zone, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._due(p_not_before timestamp with time zone, p_delay interval) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  v_due timestamptz;
BEGIN
  IF p_not_before IS NOT NULL AND p_delay IS NOT NULL THEN
    RAISE EXCEPTION 'pgrelay.notify: give p_not_before or p_delay, not both'
      USING ERRCODE = 'PR007', HINT = 'p_not_before is a point in time; p_delay counts from now().';
  END IF;
  IF p_delay < interval '0' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_delay must not be negative, got %', p_delay USING ERRCODE = 'PR008';
  END IF;
  v_due := COALESCE(p_not_before, now() + p_delay);
  IF NOT pg_catalog.isfinite(v_due) THEN
    RAISE EXCEPTION 'pgrelay.notify: the due time must be finite, got %', v_due USING ERRCODE = 'PR008';
  END IF;
  IF v_due <= now() THEN
    RETURN NULL;
  END IF;
  RETURN v_due;
END
$$;


ALTER FUNCTION pgrelay._due(p_not_before timestamp with time zone, p_delay interval) OWNER TO postgres;

--
-- Name: _enqueue(pgrelay.channels, bigint[], text[], timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._id_node(p_ids[1]);
  v_due timestamptz := COALESCE(p_due, now());
BEGIN
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, not_before,
                             expires_at, lane, phash, priority)
  SELECT u.id, u.id, ch.channel, u.payload, v_node, pgrelay._pin_of(ch.node_restricted, v_node), v_due,
         pgrelay._expiry_of(ch.expire_after, now(), v_due),
         pgrelay._lane_of(ch.concurrency_mode, u.payload), pgrelay._phash_of(ch.deduplicate, u.payload),
         ch.priority
    FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload);
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  IF pg_catalog.current_setting('pgrelay.traceparent', true) <> '' THEN
    PERFORM pgrelay._store_traces(ch.channel, p_ids);
  END IF;
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload)
    SELECT u.id, u.payload FROM ROWS FROM (pg_catalog.unnest(p_ids), pg_catalog.unnest(p_payloads)) AS u(id, payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  -- One event (notify()) takes its log id from _next_id(), which inlines;
  -- a batch from one _next_ids() call, whose fixed cost (a function of its
  -- own, with a SET clause) would triple the extra work of a single event.
  -- The k-th event gets the k-th log id: enqueued rows in the events' order.
  IF ch.publish_enqueued THEN
    IF pg_catalog.cardinality(p_ids) = 1 THEN
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      VALUES (pgrelay._next_id(), p_ids[1], p_ids[1], ch.channel, 1, 'enqueued', v_node, NULLIF(ch.priority, 0));
    ELSE
      INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, priority)
      SELECT l.id, l.queue_id, l.queue_id, ch.channel, 1, 'enqueued', v_node, NULLIF(ch.priority, 0)
        FROM ROWS FROM (pg_catalog.unnest(pgrelay._next_ids(pg_catalog.cardinality(p_ids))),
                        pg_catalog.unnest(p_ids)) AS l(id, queue_id);
    END IF;
  END IF;
END
$$;


ALTER FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamp with time zone) OWNER TO postgres;

--
-- Name: _enqueue_dedup(pgrelay.channels, text, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pgrelay._phash_of(true, p_payload);
  v_row record;
  v_id bigint;
BEGIN
  -- Two producers notifying the same payload at once: the second waits for the
  -- first to commit, then sees its row. They meet on the payload's slot row.
  PERFORM FROM pgrelay.dedup_locks d
   WHERE d.slot = (pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash)) & 4095
     FOR NO KEY UPDATE;
  SELECT q.id, q.origin_id, q.attempt INTO v_row
    FROM pgrelay.queue q
   WHERE q.channel = ch.channel AND q.phash = v_hash AND q.dispatched_at IS NULL
     AND q.payload = p_payload
     AND (NOT ch.node_restricted OR q.run_in_node = v_node)
     AND CASE WHEN p_due IS NULL
              -- Due now: an immediate row, a retry, or a delayed row whose time has come.
              THEN q.retry_of IS NOT NULL OR q.not_before <= GREATEST(q.enqueued_at, now())
              -- Delayed: a delayed row due at the same time.
              ELSE q.retry_of IS NULL AND q.not_before = p_due
         END
   ORDER BY q.origin_id
   LIMIT 1
     FOR SHARE OF q SKIP LOCKED;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node, priority)
    VALUES (v_row.id, pgrelay._next_id(), ch.channel, v_row.attempt, 'deduplicated', v_node,
            NULLIF(ch.priority, 0));
    RETURN v_row.origin_id;
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], p_due);
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamp with time zone) OWNER TO postgres;

--
-- Name: _enqueue_unique(pgrelay.channels, text, text, timestamp with time zone, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamp with time zone, p_unique_for interval) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_hash bigint := pg_catalog.hashtextextended(p_key, 0);
  v_holder bigint;
  v_id bigint;
  v_until timestamptz := now() + COALESCE(p_unique_for, interval '0');
  v_hold boolean;
  r record;
BEGIN
  UPDATE pgrelay.dedup_locks d SET slot = d.slot
   WHERE d.slot = (pg_catalog.hashtext(ch.channel) # pg_catalog.hashint8(v_hash)) & 4095;
  SELECT k.origin_id INTO v_holder
    FROM pgrelay.unique_keys k
   WHERE k.channel = ch.channel AND k.key_hash = v_hash AND k.key = p_key
     AND (NOT ch.node_restricted OR k.node = v_node)
     AND (k.until > now() OR pgrelay._event_open(k.origin_id))
   ORDER BY k.origin_id
   LIMIT 1;
  IF FOUND THEN
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, node, priority)
    VALUES (v_holder, pgrelay._next_id(), ch.channel, 1, 'deduplicated', v_node, NULLIF(ch.priority, 0));
    RETURN v_holder;
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], p_due);
  v_hold := NOT ch.node_restricted
            AND EXISTS (SELECT FROM pgrelay.nodes n
                         WHERE n.node_id >= 0 AND n.node_id <> v_node AND n.decommissioned_at IS NULL
                           AND n.mode <> 'single');
  IF v_hold THEN
    UPDATE pgrelay.queue q SET not_before = 'infinity' WHERE q.id = v_id;
  END IF;
  INSERT INTO pgrelay.unique_keys (origin_id, channel, key_hash, key, until, node, check_at, at, held, due)
  VALUES (v_id, ch.channel, v_hash, p_key, v_until, v_node, v_until, now(), v_hold,
          CASE WHEN v_hold THEN COALESCE(p_due, now()) END);
  FOR r IN
    SELECT k.origin_id, k.until FROM pgrelay.unique_keys k
     WHERE k.node = v_node AND k.check_at < now()
     ORDER BY k.check_at
     LIMIT 2
       FOR UPDATE SKIP LOCKED
  LOOP
    IF r.until <= now() AND NOT pgrelay._event_open(r.origin_id) THEN
      DELETE FROM pgrelay.unique_keys k WHERE k.origin_id = r.origin_id;
    ELSE
      UPDATE pgrelay.unique_keys k SET check_at = GREATEST(r.until, now() + interval '1 minute')
       WHERE k.origin_id = r.origin_id;
    END IF;
  END LOOP;
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay._enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamp with time zone, p_unique_for interval) OWNER TO postgres;

--
-- Name: _next_id_at(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._next_id_at(p_ms bigint) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v bigint := pg_catalog.nextval('pgrelay._id_seq');
  t bigint := p_ms << 12;
  v_moved bool := false;
BEGIN
  IF v < t - 409600 THEN
    BEGIN
      PERFORM FROM pgrelay.this_node n FOR UPDATE SKIP LOCKED;
      IF FOUND THEN
        v := pg_catalog.nextval('pgrelay._id_seq');
        IF v < t - 409600 THEN
          PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
          v := t;
        END IF;
        v_moved := true;
      ELSE
        PERFORM FROM pgrelay.this_node n FOR KEY SHARE;
      END IF;
      RAISE EXCEPTION USING ERRCODE = 'PR099';
    EXCEPTION WHEN SQLSTATE 'PR099' THEN
      NULL;
    END;
    IF NOT v_moved THEN
      v := pg_catalog.nextval('pgrelay._id_seq');
      IF v < t - 409600 THEN
        BEGIN
          PERFORM FROM pgrelay.this_node n FOR UPDATE;
          v := pg_catalog.nextval('pgrelay._id_seq');
          IF v < t - 409600 THEN
            PERFORM pg_catalog.setval('pgrelay._id_seq', t, true);
            v := t;
          END IF;
          RAISE EXCEPTION USING ERRCODE = 'PR099';
        EXCEPTION WHEN SQLSTATE 'PR099' THEN
          NULL;
        END;
      END IF;
    END IF;
  END IF;
  RETURN ((v >> 12) << 22) | (pgrelay._this_node()::bigint << 12) | (v & 4095);
END
$$;


ALTER FUNCTION pgrelay._next_id_at(p_ms bigint) OWNER TO postgres;

--
-- Name: _next_id(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._next_id() RETURNS bigint
    LANGUAGE sql
    RETURN pgrelay._next_id_at(((floor((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric)))::bigint - '1767225600000'::bigint));


ALTER FUNCTION pgrelay._next_id() OWNER TO postgres;

--
-- Name: _this_node(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._this_node() RETURNS integer
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  v_node int;
BEGIN
  SELECT t.node_id INTO v_node FROM pgrelay.this_node t;
  IF v_node IS NULL THEN
    RETURN pgrelay._node_setting();
  END IF;
  IF s = v_node::text OR (v_node = 0 AND pg_catalog.btrim(COALESCE(s, '')) = '') THEN
    RETURN v_node;
  END IF;
  IF pg_catalog.pg_has_role(session_user, 'pgrelay_processor', 'MEMBER')
     OR pg_catalog.pg_has_role(session_user, 'pgrelay_admin', 'MEMBER') THEN
    RETURN pgrelay._node_setting();
  END IF;
  RETURN v_node;
END
$$;


ALTER FUNCTION pgrelay._this_node() OWNER TO postgres;

--
-- Name: queue; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.queue (
    id bigint DEFAULT pgrelay._next_id() NOT NULL,
    origin_id bigint NOT NULL,
    channel text NOT NULL,
    payload text NOT NULL,
    owner_node integer DEFAULT pgrelay._this_node() NOT NULL,
    run_in_node integer,
    attempt integer DEFAULT 1 NOT NULL,
    retry_of bigint,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    dispatched_at timestamp with time zone,
    dispatched_by bigint,
    lane bigint,
    phash bigint,
    priority smallint DEFAULT 0 NOT NULL,
    snoozes smallint DEFAULT 0 NOT NULL,
    enqueued_by text DEFAULT 
CASE
    WHEN (current_setting('role'::text) = 'none'::text) THEN (SESSION_USER)::text
    ELSE current_setting('role'::text)
END,
    CONSTRAINT queue_attempt CHECK ((attempt > 0))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='5000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='20000', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='20000', autovacuum_vacuum_cost_delay='0');


ALTER TABLE pgrelay.queue OWNER TO postgres;

--
-- Name: _event_open(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._event_open(p_origin_id bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN ((EXISTS (SELECT FROM pgrelay.queue q WHERE (q.id = _event_open.p_origin_id))) OR (EXISTS (SELECT FROM pgrelay.queue q WHERE ((q.origin_id = _event_open.p_origin_id) AND (q.retry_of IS NOT NULL)))));


ALTER FUNCTION pgrelay._event_open(p_origin_id bigint) OWNER TO postgres;

--
-- Name: settings; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.settings (
    singleton boolean DEFAULT true NOT NULL,
    event_schema integer DEFAULT 2 NOT NULL,
    cluster_name text DEFAULT pgrelay._default_cluster_name() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT settings_cluster_name CHECK ((cluster_name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'::text)),
    CONSTRAINT settings_event_schema CHECK ((event_schema = ANY (ARRAY[1, 2]))),
    CONSTRAINT settings_one_row CHECK (singleton)
);


ALTER TABLE pgrelay.settings OWNER TO postgres;

--
-- Name: TABLE settings; Type: COMMENT; Schema: pgrelay; Owner: postgres
--

COMMENT ON TABLE pgrelay.settings IS 'At most one row: the document schema (1 or 2) and the cluster name of the status events on NATS; none: schema 2 and the database''s name (docs/events.md).';


--
-- Name: _event_settings(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) RETURNS record
    LANGUAGE sql STABLE
    BEGIN ATOMIC
 SELECT COALESCE(s.event_schema, 2) AS "coalesce",
     COALESCE(s.cluster_name, pgrelay._default_cluster_name()) AS "coalesce"
    FROM (( SELECT) one
      LEFT JOIN pgrelay.settings s ON (true));
END;


ALTER FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) OWNER TO postgres;

--
-- Name: _every_next(timestamp with time zone, interval, text, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._every_next(p_anchor timestamp with time zone, p_every interval, p_timezone text, p_after timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_secs float8 := pg_catalog.date_part('epoch', p_every);
  v_gone float8 := pg_catalog.date_part('epoch', p_after - p_anchor);
  v_k bigint;
  v_next timestamptz;
BEGIN
  IF pg_catalog.date_part('month', p_every) = 0 AND pg_catalog.date_part('year', p_every) = 0
     AND pg_catalog.date_part('day', p_every) = 0 THEN
    -- A duration: elapsed time, whatever the zone.
    v_k := GREATEST(1, pg_catalog.floor(v_gone / v_secs)::bigint + 1);
    v_next := p_anchor + v_k * p_every;
    IF v_next <= p_after THEN  -- rounding
      v_next := v_next + p_every;
    END IF;
    RETURN v_next;
  END IF;
  -- Days or months: on the zone's wall clock, from an estimate that cannot
  -- overshoot (a day may be 23 hours, a month 28 days against 30 counted).
  v_k := GREATEST(1, pg_catalog.floor(v_gone / (v_secs * 1.1))::bigint);
  LOOP
    v_next := ((p_anchor AT TIME ZONE p_timezone) + v_k * p_every) AT TIME ZONE p_timezone;
    EXIT WHEN v_next > p_after;
    v_k := v_k + 1;
  END LOOP;
  RETURN v_next;
END
$$;


ALTER FUNCTION pgrelay._every_next(p_anchor timestamp with time zone, p_every interval, p_timezone text, p_after timestamp with time zone) OWNER TO postgres;

--
-- Name: _expiry_of(interval, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamp with time zone, p_not_before timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (GREATEST(p_enqueued_at, p_not_before) + p_expire_after);


ALTER FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamp with time zone, p_not_before timestamp with time zone) OWNER TO postgres;

--
-- Name: _go_handlers_set(bigint, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.go_handlers g
   WHERE g.processor_id = p_processor
      OR NOT EXISTS (SELECT FROM pgrelay.processors p WHERE p.processor_id = g.processor_id);
  INSERT INTO pgrelay.go_handlers (processor_id, handler)
  SELECT DISTINCT p_processor, h FROM unnest(COALESCE(p_handlers, '{}'::text[])) AS h
   WHERE h IS NOT NULL;
END
$$;


ALTER FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) OWNER TO postgres;

--
-- Name: _heartbeat(bigint, text, text, integer, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_alive bool;
BEGIN
  UPDATE pgrelay.processors p SET last_seen = now() WHERE p.processor_id = p_processor;
  v_alive := FOUND;
  IF NOT v_alive THEN
    INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
    VALUES (p_processor, v_node, p_mode, p_hostname, p_pid, p_version);
  END IF;
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_alive;
END
$$;


ALTER FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) OWNER TO postgres;

--
-- Name: _holds_lease(bigint, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pgrelay._lease_holder(p_at) h
                  WHERE h.leader_node = pgrelay._this_node() AND h.term = p_term);
END
$$;


ALTER FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) OWNER TO postgres;

--
-- Name: _id_floor(timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._id_floor(p_at timestamp with time zone) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT GREATEST(0,
    (pg_catalog.floor(EXTRACT(epoch FROM p_at) * 1000))::bigint - 1767225600000) << 22
$$;


ALTER FUNCTION pgrelay._id_floor(p_at timestamp with time zone) OWNER TO postgres;

--
-- Name: _id_node(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._id_node(p_id bigint) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (((p_id >> 12) & (1023)::bigint))::integer;


ALTER FUNCTION pgrelay._id_node(p_id bigint) OWNER TO postgres;

--
-- Name: _may_take(integer, integer, integer, boolean, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((p_run_in_node = p_node) OR ((p_run_in_node IS NULL) AND (p_all OR (p_own AND (p_owner_node = p_node)))));


ALTER FUNCTION pgrelay._may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean) OWNER TO postgres;

--
-- Name: _lane_head(text, bigint, integer, boolean, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean) RETURNS TABLE(id bigint)
    LANGUAGE sql STABLE ROWS 1
    BEGIN ATOMIC
 SELECT q.id
    FROM pgrelay.queue q
   WHERE ((q.channel = _lane_head.p_channel) AND (q.lane = _lane_head.p_lane) AND (q.dispatched_at IS NULL) AND pgrelay._may_take(q.run_in_node, q.owner_node, _lane_head.p_node, _lane_head.p_all, _lane_head.p_own) AND (NOT (EXISTS ( SELECT
            FROM pgrelay.queue f
           WHERE ((f.channel = _lane_head.p_channel) AND (f.lane = _lane_head.p_lane) AND (f.dispatched_at IS NOT NULL) AND pgrelay._may_take(f.run_in_node, f.owner_node, _lane_head.p_node, _lane_head.p_all, _lane_head.p_own))))))
   ORDER BY q.origin_id, q.id
  LIMIT 1;
END;


ALTER FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean) OWNER TO postgres;

--
-- Name: _lane_of(text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE p_concurrency_mode WHEN 'channel'::text THEN (0)::bigint WHEN 'payload'::text THEN hashtextextended(p_payload, (0)::bigint) ELSE NULL::bigint END;


ALTER FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) OWNER TO postgres;

--
-- Name: _lease(interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lease(p_duration interval) RETURNS TABLE(leader_node integer, term bigint, lease_until timestamp with time zone, mine boolean, taken boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  h record;
BEGIN
  taken := false;
  IF p_duration IS NULL OR p_duration <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay._lease: the lease''s duration must be positive, got %', p_duration
      USING ERRCODE = '22023';
  END IF;
  -- This node's Processors step one at a time: the bid is locked, or,
  -- before the node's first bid, the insert of it waits for another's.
  PERFORM FROM pgrelay.leader_leases b WHERE b.node_id = v_node FOR UPDATE;
  SELECT * INTO h FROM pgrelay._lease_holder(now());
  IF h.leader_node = v_node THEN
    UPDATE pgrelay.leader_leases b SET lease_until = now() + p_duration WHERE b.node_id = v_node;
  ELSIF h.leader_node IS NULL THEN
    INSERT INTO pgrelay.leader_leases AS b (node_id, term, lease_until, taken_at)
    SELECT v_node, COALESCE(max(x.term), 0) + 1, now() + p_duration, now() FROM pgrelay.leader_leases x
    ON CONFLICT (node_id) DO UPDATE
      SET term = EXCLUDED.term, lease_until = EXCLUDED.lease_until, taken_at = EXCLUDED.taken_at;
    taken := true;
  ELSE
    -- Another node holds it: a bid of this node still running was deposed
    -- by a later term, and ends now (else it would name this node again
    -- once the later one ends).
    UPDATE pgrelay.leader_leases b SET lease_until = now() WHERE b.node_id = v_node AND b.lease_until > now();
  END IF;
  SELECT * INTO h FROM pgrelay._lease_holder(now());
  leader_node := h.leader_node;
  term := h.term;
  lease_until := h.lease_until;
  mine := COALESCE(h.leader_node = v_node, false);
  RETURN NEXT;
END
$$;


ALTER FUNCTION pgrelay._lease(p_duration interval) OWNER TO postgres;

--
-- Name: _lease_holder(timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) RETURNS TABLE(leader_node integer, term bigint, lease_until timestamp with time zone)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN QUERY SELECT l.node_id, l.term, l.lease_until FROM pgrelay.leader_leases l
                WHERE l.lease_until > p_at
                ORDER BY l.term DESC, l.node_id
                LIMIT 1;
END
$$;


ALTER FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) OWNER TO postgres;

--
-- Name: _lease_release(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lease_release(p_term bigint) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay.leader_leases b WHERE b.node_id = pgrelay._this_node() FOR UPDATE;
  IF NOT pgrelay._holds_lease(p_term, now()) THEN
    RETURN false;
  END IF;
  UPDATE pgrelay.leader_leases b SET lease_until = now() WHERE b.node_id = pgrelay._this_node();
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay._lease_release(p_term bigint) OWNER TO postgres;

--
-- Name: _lock_channel(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lock_channel(p_channel text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_start int := pg_catalog.pg_backend_pid() % 64;
BEGIN
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot >= v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot < v_start
   ORDER BY l.slot LIMIT 1
     FOR NO KEY UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN;
  END IF;
  -- Every row is held (by over 64 producers, or by an update() or
  -- unregister(), which this waits for), or the channel has none here.
  PERFORM FROM pgrelay.channel_locks l
   WHERE l.channel = p_channel AND l.slot = v_start
     FOR KEY SHARE;
  IF FOUND THEN
    RETURN;
  END IF;
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR KEY SHARE;
END
$$;


ALTER FUNCTION pgrelay._lock_channel(p_channel text) OWNER TO postgres;

--
-- Name: _lock_channel_exclusive(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._lock_channel_exclusive(p_channel text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay.channel_locks l WHERE l.channel = p_channel ORDER BY l.slot FOR UPDATE;
  UPDATE pgrelay.channel_locks l SET changes = l.changes + 1 WHERE l.channel = p_channel;
  -- A producer of a channel without lock rows locks the channel's row.
  PERFORM FROM pgrelay.channels c WHERE c.channel = p_channel FOR UPDATE;
END
$$;


ALTER FUNCTION pgrelay._lock_channel_exclusive(p_channel text) OWNER TO postgres;

--
-- Name: _log_release_key(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._log_release_key() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.unique_keys k WHERE k.origin_id = NEW.origin_id;
  RETURN NULL;
END
$$;


ALTER FUNCTION pgrelay._log_release_key() OWNER TO postgres;

--
-- Name: _max_snoozes(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._max_snoozes() RETURNS integer
    LANGUAGE sql IMMUTABLE
    RETURN 1000;


ALTER FUNCTION pgrelay._max_snoozes() OWNER TO postgres;

--
-- Name: nodes; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.nodes (
    node_id integer NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL,
    mode text NOT NULL,
    hostname text,
    version text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    leader_node integer,
    term bigint,
    lease_until timestamp with time zone,
    taken_at timestamp with time zone,
    adopted_at timestamp with time zone,
    decommissioned_at timestamp with time zone,
    CONSTRAINT nodes_id CHECK (((node_id >= '-1'::integer) AND (node_id <= 1023)))
);


ALTER TABLE pgrelay.nodes OWNER TO postgres;

--
-- Name: _may_adopt(pgrelay.nodes); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._may_adopt(n pgrelay.nodes) RETURNS boolean
    LANGUAGE sql STABLE
    RETURN (((n).node_id >= 0) AND ((n).decommissioned_at IS NULL) AND ((n).mode <> 'single'::text));


ALTER FUNCTION pgrelay._may_adopt(n pgrelay.nodes) OWNER TO postgres;

--
-- Name: _next_ids(integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._next_ids(p_n integer) RETURNS bigint[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node bigint := pgrelay._this_node();
BEGIN
  IF p_n IS NULL OR p_n <= 0 THEN
    RETURN '{}';
  END IF;
  RETURN ARRAY[pgrelay._next_id()] || ARRAY(
    SELECT ((v >> 12) << 22) | (v_node << 12) | (v & 4095)
      FROM (SELECT pg_catalog.nextval('pgrelay._id_seq') AS v FROM pg_catalog.generate_series(2, p_n) g
             ORDER BY g) s);
END
$$;


ALTER FUNCTION pgrelay._next_ids(p_n integer) OWNER TO postgres;

--
-- Name: _node_setting(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._node_setting() RETURNS integer
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  s text := pg_catalog.current_setting('pg_relay.node_id', true);
  n bigint;
BEGIN
  IF s IS NULL OR pg_catalog.btrim(s) = '' THEN
    RETURN 0;
  END IF;
  IF s !~ '^\s*[0-9]{1,9}\s*$' THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is not an integer between 0 and 1023', pg_catalog.quote_literal(s)
      USING ERRCODE = 'PR020';
  END IF;
  n := pg_catalog.btrim(s)::bigint;
  IF n > 1023 THEN
    RAISE EXCEPTION 'pgrelay: pg_relay.node_id = % is outside 0..1023', n USING ERRCODE = 'PR020';
  END IF;
  RETURN n::int;
END
$_$;


ALTER FUNCTION pgrelay._node_setting() OWNER TO postgres;

--
-- Name: _notification_of(text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._notification_of(p_kind text, p_payload text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN ((p_kind = 'email'::text) AND (p_payload ~ '^[0-9]{1,18}$'::text)) THEN (p_payload)::bigint ELSE NULL::bigint END;


ALTER FUNCTION pgrelay._notification_of(p_kind text, p_payload text) OWNER TO postgres;

--
-- Name: _notifier_status_batch(integer, bigint, bigint, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) RETURNS TABLE(id bigint, notification_id bigint, channel text, status text, error text, node integer, at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN QUERY
  SELECT s.id, s.notification_id, s.channel, s.status, s.error, s.node, s.at
    FROM pgrelay_notifier.status_events s
   WHERE s.node = p_node AND s.id > p_after AND s.id < p_before
   ORDER BY s.id
   LIMIT p_limit;
END
$$;


ALTER FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) OWNER TO postgres;

--
-- Name: _payload_ok(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._payload_ok(p_payload text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((p_payload IS NOT NULL) AND (octet_length(p_payload) <= 1048576));


ALTER FUNCTION pgrelay._payload_ok(p_payload text) OWNER TO postgres;

--
-- Name: _pending_channels(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._pending_channels() RETURNS text[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN ARRAY(
    WITH RECURSIVE pc(channel) AS (
      (SELECT q.channel FROM pgrelay.queue q
        WHERE q.dispatched_at IS NULL
        ORDER BY q.channel LIMIT 1)
      UNION ALL
      SELECT (SELECT q.channel FROM pgrelay.queue q
               WHERE q.dispatched_at IS NULL AND q.channel > pc.channel
               ORDER BY q.channel LIMIT 1)
        FROM pc WHERE pc.channel IS NOT NULL)
    SELECT pc.channel FROM pc WHERE pc.channel IS NOT NULL);
END
$$;


ALTER FUNCTION pgrelay._pending_channels() OWNER TO postgres;

--
-- Name: _phash_of(boolean, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._phash_of(p_deduplicate boolean, p_payload text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN p_deduplicate THEN hashtextextended(p_payload, (0)::bigint) ELSE NULL::bigint END;


ALTER FUNCTION pgrelay._phash_of(p_deduplicate boolean, p_payload text) OWNER TO postgres;

--
-- Name: _pin_of(boolean, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._pin_of(p_node_restricted boolean, p_node integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN p_node_restricted THEN p_node ELSE NULL::integer END;


ALTER FUNCTION pgrelay._pin_of(p_node_restricted boolean, p_node integer) OWNER TO postgres;

--
-- Name: _priority_of(integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._priority_of(p_priority integer) RETURNS smallint
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_priority < -32768 OR p_priority > 32767 THEN
    RAISE EXCEPTION 'pgrelay.notify: p_priority must be between -32768 and 32767, got %', p_priority
      USING ERRCODE = 'PR009', HINT = 'Higher runs first; NULL takes the channel''s default.';
  END IF;
  RETURN p_priority::smallint;
END
$$;


ALTER FUNCTION pgrelay._priority_of(p_priority integer) OWNER TO postgres;

--
-- Name: _processor_start(text, text, integer, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_id bigint := pgrelay._next_id();
  v_node int := pgrelay._this_node();
BEGIN
  INSERT INTO pgrelay.processors (processor_id, node_id, mode, hostname, pid, version)
  VALUES (v_id, v_node, p_mode, p_hostname, p_pid, p_version);
  INSERT INTO pgrelay.nodes (node_id, mode, hostname, version)
  VALUES (v_node, p_mode, p_hostname, p_version)
  ON CONFLICT (node_id) DO UPDATE
    SET last_seen = now(), mode = EXCLUDED.mode, hostname = EXCLUDED.hostname,
        version = EXCLUDED.version, decommissioned_at = NULL;
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) OWNER TO postgres;

--
-- Name: _processor_stop(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._processor_stop(p_processor bigint) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q SET dispatched_at = NULL, dispatched_by = NULL
   WHERE q.dispatched_by = p_processor AND q.dispatched_at IS NOT NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  DELETE FROM pgrelay.processors p WHERE p.processor_id = p_processor;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._processor_stop(p_processor bigint) OWNER TO postgres;

--
-- Name: _publish_horizon(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._publish_horizon() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_oldest timestamptz;
BEGIN
  IF NOT pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') THEN
    RAISE EXCEPTION 'pgrelay: the owner of pgrelay._publish_horizon(), %, cannot see other sessions'' transactions',
      current_user USING ERRCODE = 'PR040',
      HINT = pg_catalog.format('GRANT pg_read_all_stats TO %I;', current_user);
  END IF;
  SELECT min(COALESCE(a.xact_start, a.backend_start)) INTO v_oldest
    FROM pg_catalog.pg_stat_activity a
   WHERE a.backend_xid IS NOT NULL
     AND a.datname = pg_catalog.current_database()
     AND a.pid <> pg_catalog.pg_backend_pid();
  RETURN pgrelay._id_floor(LEAST(pg_catalog.clock_timestamp(), v_oldest) - interval '200 milliseconds');
END
$$;


ALTER FUNCTION pgrelay._publish_horizon() OWNER TO postgres;

--
-- Name: _queue_after_insert(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._queue_after_insert() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_first text;
  v_last text;
  v_channel text;
BEGIN
  INSERT INTO pgrelay.event_payloads (queue_id, payload)
  SELECT n.id, n.payload
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_payload
  ON CONFLICT (queue_id) DO NOTHING;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, priority)
  SELECT n.id, n.origin_id, n.channel, n.attempt, 'enqueued', NULLIF(n.priority, 0)
    FROM new_rows n
    JOIN pgrelay.channels c ON c.channel = n.channel
   WHERE c.publish_enqueued AND n.retry_of IS NULL
   ORDER BY n.id;
  IF pg_catalog.current_setting('pgrelay.traceparent', true) <> '' THEN
    PERFORM pgrelay._store_traces(n.channel, pg_catalog.array_agg(n.id))
       FROM new_rows n WHERE n.id = n.origin_id GROUP BY n.channel;
  END IF;
  SELECT min(n.channel), max(n.channel) INTO v_first, v_last FROM new_rows n;
  IF v_first IS NULL THEN
    RETURN NULL;
  END IF;
  IF v_first = v_last THEN
    PERFORM pgrelay._wake(v_first);
  ELSE
    FOR v_channel IN SELECT DISTINCT n.channel FROM new_rows n LOOP
      PERFORM pgrelay._wake(v_channel);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;


ALTER FUNCTION pgrelay._queue_after_insert() OWNER TO postgres;

--
-- Name: _queue_before_insert(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._queue_before_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels;
  v_replica bool := pg_catalog.current_setting('session_replication_role') = 'replica';
BEGIN
  IF v_replica AND NEW.origin_id IS NOT NULL
     AND pgrelay._id_node(NEW.id) <> pgrelay._this_node() THEN
    RETURN NEW;
  END IF;
  IF NEW.origin_id IS NULL THEN
    PERFORM pgrelay._lock_channel(NEW.channel);
  END IF;
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = NEW.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', pg_catalog.quote_literal(NEW.channel)
      USING ERRCODE = 'PR001';
  END IF;
  NEW.origin_id := COALESCE(NEW.origin_id, NEW.id);
  -- The pin is always worked out here, never taken from the caller.
  NEW.run_in_node := pgrelay._pin_of(ch.node_restricted, pgrelay._this_node());
  NEW.lane := pgrelay._lane_of(ch.concurrency_mode, NEW.payload);
  NEW.phash := pgrelay._phash_of(ch.deduplicate, NEW.payload);
  IF NEW.retry_of IS NULL AND NEW.expires_at IS NULL THEN
    NEW.expires_at := pgrelay._expiry_of(ch.expire_after, NEW.enqueued_at, NEW.not_before);
  END IF;
  IF v_replica AND ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (NEW.id, NEW.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION pgrelay._queue_before_insert() OWNER TO postgres;

--
-- Name: _queue_wake_replica(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._queue_wake_replica() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
BEGIN
  IF NEW.run_in_node IS NOT NULL THEN
    IF NEW.run_in_node <> v_node THEN
      RETURN NULL;
    END IF;
  ELSIF NEW.owner_node <> v_node
        AND EXISTS (SELECT FROM pgrelay.nodes n WHERE n.node_id = v_node AND n.mode = 'multi-node') THEN
    RETURN NULL;
  END IF;
  PERFORM pg_catalog.pg_notify('pgrelay', pgrelay._wake_hint(NEW.channel));
  RETURN NULL;
END
$$;


ALTER FUNCTION pgrelay._queue_wake_replica() OWNER TO postgres;

--
-- Name: _ready_direct(text, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) RETURNS SETOF text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT r.channel FROM pgrelay._ready_direct(p_mode, p_leader, '{sql}'::text[]) r
$$;


ALTER FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) OWNER TO postgres;

--
-- Name: _ready_direct(text, boolean, text[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) RETURNS TABLE(channel text, kind text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
  v_node int := pgrelay._this_node();
  v_all bool;
  v_own bool;
  v_pending text[];
BEGIN
  SELECT s.all_rows, s.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, NULL) s;
  v_pending := pgrelay._pending_channels();
  -- A lateral LIMIT 1 in queue_ready's order per channel with rows pending:
  -- the planner would otherwise answer the EXISTS with a hash of the whole
  -- queue.
  RETURN QUERY
  SELECT c.channel, c.kind FROM pgrelay.channels c
   CROSS JOIN LATERAL (
     SELECT 1 FROM pgrelay.queue q
      WHERE q.channel = c.channel AND q.dispatched_at IS NULL AND q.not_before <= now()
        AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
      ORDER BY q.not_before, q.id
      LIMIT 1) r
   WHERE c.channel = ANY (v_pending)
     AND c.kind IN ('sql', 'go') AND c.concurrency_mode = 'none' AND NOT c.paused
     AND c.max_in_flight IS NULL AND c.rate_limit IS NULL
     AND pgrelay._claim_kind(c.kind, c.handler) = ANY (p_kinds);
  IF NOT 'sql' = ANY (p_kinds) THEN
    RETURN;
  END IF;
  -- Any ready lane row will do: a hint, checked by the lane batch itself.
  RETURN QUERY
  SELECT ''::text, 'sql'::text FROM pgrelay.queue q
   WHERE q.dispatched_at IS NULL AND q.lane IS NOT NULL AND q.not_before <= now()
     AND pgrelay._may_take(q.run_in_node, q.owner_node, v_node, v_all, v_own)
     AND EXISTS (SELECT FROM pgrelay.channels c
                  WHERE c.channel = q.channel AND c.kind = 'sql' AND NOT c.paused
                    AND c.concurrency_mode IN ('channel', 'payload')
                    AND c.max_in_flight IS NULL AND c.rate_limit IS NULL)
   LIMIT 1;
END
$$;


ALTER FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) OWNER TO postgres;

--
-- Name: _record_node(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._record_node() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_new int := pgrelay._node_setting();
  v_old int;
BEGIN
  SELECT t.node_id INTO v_old FROM pgrelay.this_node t;
  IF v_old IS DISTINCT FROM v_new THEN
    INSERT INTO pgrelay.this_node AS t (node_id) VALUES (v_new)
    ON CONFLICT (singleton) DO UPDATE SET node_id = excluded.node_id, updated_at = now();
  END IF;
  RETURN COALESCE(v_old, v_new);
END
$$;


ALTER FUNCTION pgrelay._record_node() OWNER TO postgres;

--
-- Name: _rescue(bigint, interval, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $_$
DECLARE
  v_node int := pgrelay._this_node();
  v_dead bigint[];
  n int;
  v_emails bigint[];
  v_whys text[];
  v_channels text[];
  v_events bigint[];
BEGIN
  WITH dead AS (
    DELETE FROM pgrelay.processors p
     WHERE p.node_id = v_node AND p.processor_id <> p_processor
       AND p.last_seen < now() - p_dead_after
    RETURNING p.processor_id
  )
  SELECT COALESCE(pg_catalog.array_agg(dead.processor_id), '{}') INTO v_dead FROM dead;

  -- The holder is read before the update (RETURNING would see it cleared).
  -- A row pinned to another node is that node's, whoever holds it: only
  -- that node (or a decommission) changes it.
  WITH held AS (
    SELECT q.id, q.origin_id, q.channel, q.attempt, q.priority, COALESCE(c.max_attempts, 0) AS max_attempts,
           CASE WHEN q.dispatched_by = ANY (v_dead)
                THEN pg_catalog.format('processor %s stopped heartbeating while running attempt %s',
                                       q.dispatched_by, q.attempt)
                ELSE pg_catalog.format('claim lease expired: processor %s held attempt %s past the channel timeout plus %s',
                                       q.dispatched_by, q.attempt, p_lease_grace)
           END AS why
      FROM pgrelay.queue q
      LEFT JOIN pgrelay.channels c ON c.channel = q.channel
     WHERE q.dispatched_at IS NOT NULL
       AND (q.run_in_node IS NULL OR q.run_in_node = v_node)
       AND (q.dispatched_by = ANY (v_dead)
            OR (q.dispatched_at < now() - COALESCE(c.timeout, interval '0') - p_lease_grace
                AND (EXISTS (SELECT FROM pgrelay.processors p
                              WHERE p.processor_id = q.dispatched_by AND p.node_id = v_node)
                     OR NOT EXISTS (SELECT FROM pgrelay.processors p
                                     WHERE p.processor_id = q.dispatched_by))))
     FOR UPDATE OF q SKIP LOCKED
  ), back AS (
    UPDATE pgrelay.queue q
       SET dispatched_at = NULL, dispatched_by = NULL, attempt = q.attempt + 1
      FROM held
     WHERE q.id = held.id AND held.attempt < held.max_attempts
    RETURNING q.id
  ), gone AS (
    DELETE FROM pgrelay.queue q
     USING held
     WHERE q.id = held.id AND held.attempt >= held.max_attempts
    RETURNING q.id, q.channel, q.payload, q.run_in_node
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT gone.id, held.origin_id, gone.channel, gone.payload, held.attempt,
           held.why || ' (its last attempt)', 'gave_up', pg_catalog.clock_timestamp(), v_node,
           gone.run_in_node, pgrelay._notification_of(c.kind, gone.payload), NULLIF(held.priority, 0)
      FROM gone
      JOIN held ON held.id = gone.id
      LEFT JOIN pgrelay.channels c ON c.channel = gone.channel
     ORDER BY gone.id
    RETURNING 1
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
    SELECT held.id, held.origin_id, held.channel, held.attempt,
           CASE WHEN held.attempt < held.max_attempts THEN 'rescued' ELSE 'gave_up' END,
           CASE WHEN held.attempt < held.max_attempts THEN held.why
                ELSE held.why || ' (its last attempt)' END,
           v_node, NULLIF(held.priority, 0)
      FROM held
     WHERE held.id IN (SELECT back.id FROM back UNION ALL SELECT gone.id FROM gone)
     ORDER BY held.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.whys, e.channels, e.events
    INTO n, v_emails, v_whys, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(gone.payload::bigint ORDER BY gone.id) AS ids,
                 pg_catalog.array_agg(held.why ORDER BY gone.id) AS whys,
                 pg_catalog.array_agg(gone.channel ORDER BY gone.id) AS channels,
                 pg_catalog.array_agg(held.origin_id ORDER BY gone.id) AS events
            FROM gone
            JOIN held ON held.id = gone.id
            JOIN pgrelay.channels c ON c.channel = gone.channel AND c.kind = 'email'
           WHERE gone.payload ~ '^[0-9]{1,18}$') e;
  -- Only a notification this event may send: not one another event holds,
  -- nor another channel's (fail_for_event, the send gate's rule).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i],
      'gave up: ' || v_whys[i] || ' (its last attempt)');
  END LOOP;
  RETURN n;
END
$_$;


ALTER FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) OWNER TO postgres;

--
-- Name: _resolve_keys(interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._resolve_keys(p_dead_after interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_term bigint;
  v_proven bigint;
  v_waiting boolean := false;
  v_survivor bigint;
  h record;
  n int := 0;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.unique_keys k WHERE k.held) THEN
    RETURN 0;
  END IF;
  SELECT a.term INTO v_term FROM pgrelay.sync_asks a WHERE a.node_id = v_node;
  -- The lowest horizon of the live peers (NULL when one has none); every
  -- id when there is no peer.
  SELECT CASE WHEN bool_and(s.horizon IS NOT NULL) THEN min(s.horizon) END INTO v_proven
    FROM pgrelay._sync_peers(COALESCE(v_term, 0), p_dead_after) p
    LEFT JOIN pgrelay.sync_answers s ON s.node_id = v_node AND s.peer = p.peer
   WHERE p.alive
  HAVING count(*) > 0;
  IF NOT FOUND THEN
    v_proven := 9223372036854775807;
  END IF;
  FOR h IN
    SELECT u.*, q.priority FROM pgrelay.unique_keys u
      JOIN pgrelay.queue q ON q.id = u.origin_id
     WHERE u.held AND q.owner_node = v_node AND q.dispatched_at IS NULL
     ORDER BY u.origin_id
       FOR UPDATE OF u, q
  LOOP
    IF NOT COALESCE(h.origin_id < v_proven, h.at < now() - p_dead_after) THEN
      v_waiting := true;
      CONTINUE;
    END IF;
    SELECT min(x.origin_id) INTO v_survivor
      FROM pgrelay.unique_keys x
     WHERE x.channel = h.channel AND x.key_hash = h.key_hash AND x.key = h.key
       AND (x.until > now() OR pgrelay._event_open(x.origin_id));
    IF v_survivor = h.origin_id THEN
      UPDATE pgrelay.queue q SET not_before = h.due WHERE q.id = h.origin_id;
      UPDATE pgrelay.unique_keys x SET held = false, due = NULL WHERE x.origin_id = h.origin_id;
    ELSE
      DELETE FROM pgrelay.queue q WHERE q.id = h.origin_id;
      DELETE FROM pgrelay.unique_keys x WHERE x.origin_id = h.origin_id;
      INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
      VALUES (h.origin_id, h.origin_id, h.channel, 1, 'deduplicated',
              pg_catalog.format('deduplicated: event %s holds the key (the lowest id of its key across the cluster)',
                                v_survivor), v_node, NULLIF(h.priority, 0));
    END IF;
    n := n + 1;
  END LOOP;
  IF v_waiting AND (v_term IS NULL OR NOT EXISTS (
        SELECT FROM pgrelay._sync_peers(v_term, p_dead_after) p WHERE p.alive AND NOT p.answered)) THEN
    PERFORM pgrelay._sync_ask();
  END IF;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._resolve_keys(p_dead_after interval) OWNER TO postgres;

--
-- Name: _retry_after(bigint[], bigint[], interval[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  UPDATE pgrelay.queue q
     SET not_before = now() + o.delay
    FROM unnest(p_ids, p_origin_ids, p_delays) AS o(id, origin_id, delay)
   WHERE q.origin_id = o.origin_id AND q.retry_of = o.id AND q.dispatched_at IS NULL
     AND o.delay IS NOT NULL AND o.delay >= interval '0';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) OWNER TO postgres;

--
-- Name: _retry_dead(pgrelay.dead_letters); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._retry_dead(dl pgrelay.dead_letters) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  ch pgrelay.channels;
  v_pin int;
  v_id bigint;
BEGIN
  PERFORM pgrelay._lock_channel(dl.channel);
  SELECT * INTO ch FROM pgrelay.channels c WHERE c.channel = dl.channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay.retry: dead letter % is of channel %, which is not registered', dl.id,
      pg_catalog.quote_literal(dl.channel) USING ERRCODE = 'PR001',
      HINT = 'Register the channel again, or discard the dead letter with pgrelay.discard().';
  END IF;
  v_pin := pgrelay._pin_of(ch.node_restricted, COALESCE(dl.run_in_node, v_node));
  IF v_pin IS NOT NULL AND EXISTS (SELECT FROM pgrelay.nodes x
                                    WHERE x.node_id = v_pin AND x.decommissioned_at IS NOT NULL) THEN
    RAISE EXCEPTION 'pgrelay.retry: dead letter % is pinned to node %, which was decommissioned', dl.id, v_pin
      USING ERRCODE = 'PR051',
      HINT = 'A row pinned to that node could never run; discard the dead letter with pgrelay.discard().';
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'on', true);
  INSERT INTO pgrelay.queue (id, origin_id, channel, payload, owner_node, run_in_node, attempt, retry_of,
                             enqueued_at, not_before, expires_at, lane, phash, priority)
  VALUES (v_id, dl.origin_id, dl.channel, dl.payload, COALESCE(v_pin, v_node), v_pin, 1, dl.id,
          now(), now(), pgrelay._expiry_of(ch.expire_after, now(), now()),
          pgrelay._lane_of(ch.concurrency_mode, dl.payload), pgrelay._phash_of(ch.deduplicate, dl.payload),
          COALESCE(dl.priority, 0));
  PERFORM pg_catalog.set_config('pgrelay.stamped', 'off', true);
  PERFORM pgrelay._wake(ch.channel);
  IF ch.publish_payload THEN
    INSERT INTO pgrelay.event_payloads (queue_id, payload) VALUES (v_id, dl.payload)
    ON CONFLICT (queue_id) DO NOTHING;
  END IF;
  INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, node, priority)
  VALUES (v_id, dl.origin_id, dl.channel, 1, 'retried',
          pg_catalog.format('retried by %s: dead letter %s (%s after %s attempts) enqueued again as %s',
                            session_user, dl.id, dl.outcome, dl.attempts, v_id),
          v_node, NULLIF(dl.priority, 0));
  IF ch.kind = 'email' AND dl.notification_id IS NOT NULL THEN
    PERFORM pgrelay_notifier.requeue(dl.notification_id, dl.channel,
      pg_catalog.format('queued again: dead letter %s of event %s was retried by %s', dl.id, dl.origin_id,
                        session_user));
  END IF;
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay._retry_dead(dl pgrelay.dead_letters) OWNER TO postgres;

--
-- Name: _schedule_fire(text, timestamp with time zone, timestamp with time zone, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  s pgrelay.schedule_defs;
  v_due timestamptz;
  v_id bigint;
  v_err text;
BEGIN
  SELECT * INTO s FROM pgrelay.schedule_defs x WHERE x.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF p_error IS NOT NULL THEN
    UPDATE pgrelay.schedule_defs x SET next_fire = 'infinity', last_error = p_error WHERE x.name = p_name;
    RETURN NULL;
  END IF;
  v_due := COALESCE(s.next_fire, p_first);
  IF v_due IS NULL OR v_due > now() THEN
    UPDATE pgrelay.schedule_defs x SET next_fire = v_due WHERE x.name = p_name AND x.next_fire IS DISTINCT FROM v_due;
    RETURN NULL;
  END IF;
  BEGIN
    v_id := pgrelay.notify(p_channel := s.channel, p_payload := s.payload);
  EXCEPTION WHEN OTHERS THEN
    v_err := pg_catalog.format('notify failed: %s (SQLSTATE %s)', SQLERRM, SQLSTATE);
  END;
  UPDATE pgrelay.schedule_defs x
     SET next_fire = CASE WHEN s.every IS NOT NULL THEN pgrelay._every_next(s.anchor, s.every, s.timezone, now())
                          ELSE p_next END,
         last_due = v_due, last_fire = now(), last_event = v_id, last_error = v_err,
         fires = x.fires + CASE WHEN v_id IS NOT NULL THEN 1 ELSE 0 END
   WHERE x.name = p_name;
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) OWNER TO postgres;

--
-- Name: _schedules_due(text, boolean, bigint, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) RETURNS TABLE(name text, cron text, timezone text, next_fire timestamp with time zone, anchor timestamp with time zone, now timestamp with time zone)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all bool;
  v_own bool;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  RETURN QUERY
  SELECT s.name, s.cron, s.timezone, s.next_fire, s.anchor, now()
    FROM pgrelay.schedule_defs s
   WHERE (v_all OR (v_own AND s.owner_node = pgrelay._this_node()))
     AND (s.next_fire IS NULL OR s.next_fire <= now())
   ORDER BY s.next_fire NULLS FIRST
   LIMIT p_limit
     FOR UPDATE OF s SKIP LOCKED;
END
$$;


ALTER FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) OWNER TO postgres;

--
-- Name: _schedules_wake(text, boolean, bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) RETURNS double precision
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all bool;
  v_own bool;
  v_next timestamptz;
BEGIN
  SELECT x.all_rows, x.own_rows INTO v_all, v_own FROM pgrelay._claim_scope(p_mode, p_leader, p_term) x;
  IF v_all THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s;
  ELSIF v_own THEN
    SELECT min(COALESCE(s.next_fire, '-infinity')) INTO v_next FROM pgrelay.schedule_defs s
     WHERE s.owner_node = pgrelay._this_node();
  END IF;
  IF v_next IS NULL OR v_next = 'infinity' THEN
    RETURN NULL;  -- none, or only expressions that never match
  ELSIF v_next = '-infinity' THEN
    RETURN 0;
  END IF;
  RETURN pg_catalog.date_part('epoch', v_next - pg_catalog.clock_timestamp());
END
$$;


ALTER FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) OWNER TO postgres;

--
-- Name: _snooze(bigint, bigint[], timestamp with time zone[], interval[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) RETURNS record
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


ALTER FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) OWNER TO postgres;

--
-- Name: _store_traces(text, bigint[]); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v text := pg_catalog.current_setting('pgrelay.traceparent', true);
BEGIN
  IF pg_catalog.length(v) > 55 THEN
    IF pg_catalog.substr(v, 56) IS DISTINCT FROM '@' || pg_catalog.statement_timestamp()::pg_catalog.text THEN
      RETURN; -- set by an earlier statement's _traced
    END IF;
    v := pg_catalog.left(v, 55);
  END IF;
  IF v ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
     AND pg_catalog.substr(v, 4, 32) <> pg_catalog.repeat('0', 32)
     AND pg_catalog.substr(v, 37, 16) <> pg_catalog.repeat('0', 16)
     AND EXISTS (SELECT FROM pgrelay.channels c WHERE c.channel = p_channel AND c.store_traces) THEN
    INSERT INTO pgrelay.event_traces (origin_id, traceparent)
    SELECT u.id, v FROM pg_catalog.unnest(p_ids) AS u(id)
    ON CONFLICT (origin_id) DO NOTHING;
  END IF;
END
$_$;


ALTER FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) OWNER TO postgres;

--
-- Name: _succeed(bigint, bigint, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_done int;
BEGIN
  SELECT o.done INTO v_done
    FROM pgrelay._complete_outcomes(p_processor, ARRAY[p_id], ARRAY[p_claimed_at], ARRAY['succeeded'],
                                    ARRAY[NULL::text]) o;
  IF v_done = 0 THEN
    RAISE EXCEPTION 'pgrelay: the claim of event % was taken back before it completed', p_id
      USING ERRCODE = 'PR030';
  END IF;
END
$$;


ALTER FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) OWNER TO postgres;

--
-- Name: _sync_answer(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._sync_answer() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_node int := pgrelay._this_node();
  v_horizon bigint;
  n int;
BEGIN
  IF NOT EXISTS (SELECT FROM pgrelay.sync_asks a
                  WHERE a.node_id <> v_node
                    AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                                     WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)) THEN
    RETURN 0;
  END IF;
  BEGIN
    v_horizon := pgrelay._publish_horizon();
  EXCEPTION WHEN SQLSTATE 'PR040' THEN
    v_horizon := NULL;
  END;
  INSERT INTO pgrelay.sync_answers AS s (node_id, peer, term, knows, horizon)
  SELECT a.node_id, v_node, a.term, pgrelay._adopters(), v_horizon
    FROM pgrelay.sync_asks a
   WHERE a.node_id <> v_node
     AND NOT EXISTS (SELECT FROM pgrelay.sync_answers x
                      WHERE x.node_id = a.node_id AND x.peer = v_node AND x.term >= a.term)
  ON CONFLICT (node_id, peer) DO UPDATE
    SET term = EXCLUDED.term, knows = EXCLUDED.knows, horizon = EXCLUDED.horizon, answered_at = now()
    WHERE s.term < EXCLUDED.term;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._sync_answer() OWNER TO postgres;

--
-- Name: _sync_ask(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._sync_ask() RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay.sync_asks AS a (node_id, term) VALUES (pgrelay._this_node(), 1)
  ON CONFLICT (node_id) DO UPDATE SET term = a.term + 1, asked_at = now()
  RETURNING a.term
$$;


ALTER FUNCTION pgrelay._sync_ask() OWNER TO postgres;

--
-- Name: _sync_peers(bigint, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) RETURNS TABLE(peer integer, answered boolean, alive boolean)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH me AS (SELECT pgrelay._this_node() AS node),
  answered AS (
    SELECT s.peer, s.knows FROM pgrelay.sync_answers s, me
     WHERE s.node_id = me.node AND s.term >= p_term
  ), peers AS (
    SELECT p.node FROM pg_catalog.unnest(pgrelay._adopters()) AS p(node)
    UNION
    SELECT k.node FROM answered a, pg_catalog.unnest(a.knows) AS k(node)
    UNION
    SELECT a.peer FROM answered a
  )
  SELECT p.node,
         EXISTS (SELECT FROM answered a WHERE a.peer = p.node),
         EXISTS (SELECT FROM pgrelay.nodes n WHERE n.node_id = p.node AND n.last_seen >= now() - p_dead_after)
    FROM peers p, me
   WHERE p.node <> me.node
     AND NOT EXISTS (SELECT FROM pgrelay.nodes d WHERE d.node_id = p.node AND d.decommissioned_at IS NOT NULL)
   ORDER BY p.node
$$;


ALTER FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) OWNER TO postgres;

--
-- Name: _take_dead_letter(bigint, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._take_dead_letter(p_id bigint, p_caller text) RETURNS pgrelay.dead_letters
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  dl pgrelay.dead_letters;
BEGIN
  DELETE FROM pgrelay.dead_letters d WHERE d.id = p_id RETURNING * INTO dl;
  IF NOT FOUND THEN
    RAISE EXCEPTION '%: % is not a dead letter', p_caller, COALESCE(p_id::text, 'NULL')
      USING ERRCODE = 'PR050',
      HINT = 'pgrelay dead list shows the dead letters; one retried, discarded or past the retention is gone.';
  END IF;
  RETURN dl;
END
$$;


ALTER FUNCTION pgrelay._take_dead_letter(p_id bigint, p_caller text) OWNER TO postgres;

--
-- Name: _traced(text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._traced(p_channel text, p_traceparent text) RETURNS text
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT pg_catalog.set_config('pgrelay.traceparent',
           COALESCE(p_traceparent, '') || '@' || pg_catalog.statement_timestamp()::pg_catalog.text, true);
  SELECT p_channel
$$;


ALTER FUNCTION pgrelay._traced(p_channel text, p_traceparent text) OWNER TO postgres;

--
-- Name: _trim_dead_letters(interval, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.dead_letters d
   WHERE d.id = ANY (ARRAY(SELECT x.id FROM pgrelay.dead_letters x
                            WHERE x.ended_at < now() - p_older_than
                            ORDER BY x.ended_at LIMIT p_batch));
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) OWNER TO postgres;

--
-- Name: _trim_event_payloads(interval, integer, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval DEFAULT NULL::interval) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_published bigint;
  n int;
BEGIN
  SELECT min(c.last_id) INTO v_published FROM pgrelay.publish_cursors c WHERE c.source = 'log';
  IF v_published IS NOT NULL THEN
    v_floor := LEAST(v_floor, GREATEST(v_published + 1,
      CASE WHEN p_unpublished_max IS NOT NULL THEN pgrelay._id_floor(now() - p_unpublished_max) END));
  END IF;
  DELETE FROM pgrelay.event_payloads e
   WHERE e.queue_id IN (SELECT x.queue_id FROM pgrelay.event_payloads x
                         WHERE x.queue_id < v_floor
                           AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.queue_id)
                         ORDER BY x.queue_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval) OWNER TO postgres;

--
-- Name: _trim_event_traces(interval, integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n int;
BEGIN
  DELETE FROM pgrelay.event_traces t
   WHERE t.origin_id IN (SELECT x.origin_id FROM pgrelay.event_traces x
                          WHERE x.origin_id < pgrelay._id_floor(now() - p_older_than)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = x.origin_id)
                            AND NOT EXISTS (SELECT FROM pgrelay.queue q
                                             WHERE q.origin_id = x.origin_id AND q.retry_of IS NOT NULL)
                          ORDER BY x.origin_id LIMIT p_batch);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) OWNER TO postgres;

--
-- Name: _trim_log(interval, integer, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval DEFAULT NULL::interval) RETURNS TABLE(deleted integer, dropped integer, dropped_first bigint, dropped_last bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_floor bigint := pgrelay._id_floor(now() - p_older_than);
  v_cap bigint;
  v_node int;
  v_cur bigint;
  v_upto bigint;
  v_left int := p_batch;
  n int;
  r record;
BEGIN
  deleted := 0;
  dropped := 0;
  IF p_unpublished_max IS NOT NULL THEN
    v_cap := LEAST(v_floor, pgrelay._id_floor(now() - p_unpublished_max));
  END IF;
  -- The nodes that wrote log rows: a loose scan of the (node, id) index.
  FOR v_node IN
    WITH RECURSIVE ns AS (
      SELECT (SELECT min(l.node) FROM pgrelay.log l) AS node
      UNION ALL
      SELECT (SELECT min(l.node) FROM pgrelay.log l WHERE l.node > ns.node) FROM ns WHERE ns.node IS NOT NULL
    )
    SELECT ns.node FROM ns WHERE ns.node IS NOT NULL
  LOOP
    EXIT WHEN v_left <= 0;
    v_cur := NULL;
    SELECT c.last_id INTO v_cur FROM pgrelay.publish_cursors c WHERE c.node_id = v_node AND c.source = 'log';
    -- Published (or no publisher) and past the retention: one index range,
    -- so that rows held back are not read again at every call.
    -- (The row comparisons keep the generic plan on log_node_id: with
    -- x.node = v_node the planner may walk the primary key instead, through
    -- every other node's rows; TestExplainTrimLogUsesNodeIndex.)
    v_upto := CASE WHEN v_cur IS NULL THEN v_floor ELSE LEAST(v_floor, v_cur + 1) END;
    DELETE FROM pgrelay.log l
     WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                              WHERE (x.node, x.id) >= (v_node, 0::bigint) AND (x.node, x.id) < (v_node, v_upto)
                              ORDER BY x.node, x.id LIMIT v_left));
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    v_left := v_left - n;
    -- Unpublished and past the cap.
    IF v_cur IS NOT NULL AND v_cap IS NOT NULL AND v_left > 0 THEN
      WITH x AS (
        DELETE FROM pgrelay.log l
         WHERE l.id = ANY (ARRAY(SELECT x.id FROM pgrelay.log x
                                  WHERE (x.node, x.id) > (v_node, v_cur) AND (x.node, x.id) < (v_node, v_cap)
                                  ORDER BY x.node, x.id LIMIT v_left))
        RETURNING l.id, l.at
      )
      SELECT count(*)::int AS rows, min(x.id) AS first_id, max(x.id) AS last_id, min(x.at) AS first_at,
             max(x.at) AS last_at
        INTO r FROM x;
      IF r.rows > 0 THEN
        INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
        VALUES (v_node, r.rows, r.first_id, r.last_id, r.first_at, r.last_at);
        deleted := deleted + r.rows;
        dropped := dropped + r.rows;
        v_left := v_left - r.rows;
        dropped_first := LEAST(dropped_first, r.first_id);
        dropped_last := GREATEST(dropped_last, r.last_id);
      END IF;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$$;


ALTER FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval) OWNER TO postgres;

--
-- Name: _unique_for(interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._unique_for(p_unique_for interval) RETURNS interval
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF p_unique_for <= interval '0' OR p_unique_for > interval '3650 days' THEN
    RAISE EXCEPTION 'pgrelay.notify: p_unique_for must be more than zero and at most 3650 days, got %', p_unique_for
      USING ERRCODE = 'PR024';
  END IF;
  RETURN p_unique_for;
END
$$;


ALTER FUNCTION pgrelay._unique_for(p_unique_for interval) OWNER TO postgres;

--
-- Name: _wake(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._wake(p_channel text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_slot int := pgrelay._wake_slot(p_channel);
  v_armed bool;
BEGIN
  IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    SELECT w.armed INTO v_armed FROM pgrelay.wake_slots w WHERE w.slot = v_slot;
    IF FOUND THEN
      IF NOT v_armed THEN
        RETURN;
      END IF;
      -- Armed: take it, unless another producer is taking it right now
      -- (that one's notification is on its way).
      UPDATE pgrelay.wake_slots w SET armed = false
       WHERE w.slot = (SELECT s.slot FROM pgrelay.wake_slots s
                        WHERE s.slot = v_slot AND s.armed
                        FOR UPDATE SKIP LOCKED);
      IF NOT FOUND THEN
        RETURN;
      END IF;
    END IF;
  END IF;
  PERFORM pg_catalog.pg_notify('pgrelay', pgrelay._wake_hint(p_channel));
END
$$;


ALTER FUNCTION pgrelay._wake(p_channel text) OWNER TO postgres;

--
-- Name: _wake_hint(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._wake_hint(p_channel text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v text;
BEGIN
  SELECT pg_catalog.md5(t.wake_key || p_channel) INTO v FROM pgrelay.this_node t;
  RETURN v;
END
$$;


ALTER FUNCTION pgrelay._wake_hint(p_channel text) OWNER TO postgres;

--
-- Name: _wake_slot(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._wake_slot(p_channel text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (hashtext(p_channel) & 1023);


ALTER FUNCTION pgrelay._wake_slot(p_channel text) OWNER TO postgres;

--
-- Name: _wake_xids_ended(pg_snapshot); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN NOT EXISTS (SELECT FROM pg_catalog.pg_snapshot_xip(p_snapshot) AS x(xid)
                      WHERE pg_catalog.pg_xact_status(x.xid) = 'in progress');
END
$$;


ALTER FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) OWNER TO postgres;

--
-- Name: cancel(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.cancel(p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_by text;
BEGIN
  SELECT q.enqueued_by INTO v_by
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id) OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF NOT FOUND OR NOT pgrelay_notifier._may_see(v_by) THEN
    RETURN false;
  END IF;
  PERFORM pgrelay._cancel_request(p_id, pgrelay_notifier._caller());
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay.cancel(p_id bigint) OWNER TO postgres;

--
-- Name: decommission(integer, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval DEFAULT '00:01:00'::interval) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_seen timestamptz;
  v_adopter int;
  v_procs bigint[];
  v_why text := pg_catalog.format('node %s was decommissioned', p_node);
  v_emails bigint[];
  v_errors text[];
  n bigint;
  v_channels text[];
  v_events bigint[];
BEGIN
  IF p_node IS NULL OR p_node < 0 OR p_node > 1023 THEN
    RAISE EXCEPTION 'pgrelay.decommission: node id % is outside 0..1023', p_node USING ERRCODE = 'PR020';
  END IF;
  IF p_dead_after IS NULL OR p_dead_after <= interval '0' THEN
    RAISE EXCEPTION 'pgrelay.decommission: p_dead_after must be positive, got %',
      COALESCE(p_dead_after::text, 'NULL') USING ERRCODE = 'PR023',
      HINT = 'It is how long the node must have been silent; with zero or less a live node would count as dead.';
  END IF;
  SELECT x.last_seen INTO v_seen FROM pgrelay.nodes x
   WHERE x.node_id = p_node AND x.decommissioned_at IS NULL;
  IF v_seen >= now() - p_dead_after THEN
    RAISE EXCEPTION 'pgrelay.decommission: node % heartbeated % ago; stop its Processors first',
      p_node, now() - v_seen USING ERRCODE = 'PR022',
      HINT = 'A node is decommissioned only once it has been silent for p_dead_after.';
  END IF;
  WITH d AS (
    DELETE FROM pgrelay.queue q
     WHERE q.run_in_node = p_node
    RETURNING q.id, q.origin_id, q.channel, q.attempt, q.payload, q.run_in_node, q.priority,
              pg_catalog.format('%s: a row pinned to it can never run%s', v_why,
                                CASE WHEN q.dispatched_at IS NOT NULL
                                     THEN pg_catalog.format(' (its processor %s held attempt %s)',
                                                            q.dispatched_by, q.attempt)
                                     ELSE '' END) AS why
  ), lg AS (
    INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event, error, priority)
    SELECT d.id, d.origin_id, d.channel, d.attempt, 'gave_up', d.why, NULLIF(d.priority, 0)
      FROM d ORDER BY d.id
    RETURNING 1
  ), dl AS (
    INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome,
                                      ended_at, node, run_in_node, notification_id, priority)
    SELECT d.id, d.origin_id, d.channel, d.payload, d.attempt, d.why, 'gave_up',
           pg_catalog.clock_timestamp(), pgrelay._this_node(), d.run_in_node,
           pgrelay._notification_of(c.kind, d.payload), NULLIF(d.priority, 0)
      FROM d
      LEFT JOIN pgrelay.channels c ON c.channel = d.channel
     ORDER BY d.id
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM lg), e.ids, e.errors, e.channels, e.events
    INTO n, v_emails, v_errors, v_channels, v_events
    FROM (SELECT pg_catalog.array_agg(d.payload::bigint ORDER BY d.id) AS ids,
                 pg_catalog.array_agg(d.why ORDER BY d.id) AS errors,
                 pg_catalog.array_agg(d.channel ORDER BY d.id) AS channels,
                 pg_catalog.array_agg(d.origin_id ORDER BY d.id) AS events
            FROM d
            JOIN pgrelay.channels c ON c.channel = d.channel AND c.kind = 'email'
           WHERE d.payload ~ '^[0-9]{1,18}$') e;
  -- A discarded email event never reaches the email handler: its
  -- notification ends 'failed' here, if this event may send it (not one
  -- another event holds or sent, nor another channel's: fail_for_event).
  FOR i IN 1 .. COALESCE(pg_catalog.cardinality(v_emails), 0) LOOP
    PERFORM pgrelay_notifier.fail_for_event(v_emails[i], v_channels[i], v_events[i], 'gave up: ' || v_errors[i]);
  END LOOP;

  SELECT min(x.node_id) INTO v_adopter FROM pgrelay.nodes x
   WHERE pgrelay._may_adopt(x) AND x.node_id <> p_node AND x.last_seen >= now() - p_dead_after;
  IF v_adopter IS NOT NULL THEN
    SELECT COALESCE(pg_catalog.array_agg(p.processor_id), '{}') INTO v_procs
      FROM pgrelay.processors p WHERE p.node_id = p_node;
    PERFORM pgrelay._adopt_rows(p_node, v_adopter, v_procs, v_why);
  END IF;
  DELETE FROM pgrelay.processors p WHERE p.node_id = p_node;
  -- The tombstone. A node that never heartbeated gets one too: rows
  -- enqueued there are adopted all the same.
  INSERT INTO pgrelay.nodes AS x (node_id, mode, decommissioned_at, adopted_at)
  VALUES (p_node, 'decommissioned', now(), CASE WHEN v_adopter IS NOT NULL THEN now() END)
  ON CONFLICT (node_id) DO UPDATE
    SET decommissioned_at = now(),
        adopted_at = CASE WHEN v_adopter IS NOT NULL THEN now() ELSE x.adopted_at END;
  RETURN n;
END
$_$;


ALTER FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval) OWNER TO postgres;

--
-- Name: discard(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.discard(p_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM pgrelay._discarded(pgrelay._take_dead_letter(p_id, 'pgrelay.discard'));
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay.discard(p_id bigint) OWNER TO postgres;

--
-- Name: discard_all(text, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.discard_all(p_channel text, p_since timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  dl pgrelay.dead_letters;
  n bigint := 0;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.discard_all: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  FOR dl IN
    WITH x AS (
      DELETE FROM pgrelay.dead_letters d
       WHERE d.id IN (SELECT y.id FROM pgrelay.dead_letters y
                       WHERE y.channel = p_channel AND (p_since IS NULL OR y.ended_at >= p_since)
                       ORDER BY y.ended_at, y.id
                         FOR UPDATE SKIP LOCKED)
      RETURNING d.*
    )
    SELECT * FROM x ORDER BY x.ended_at, x.id
  LOOP
    PERFORM pgrelay._discarded(dl);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay.discard_all(p_channel text, p_since timestamp with time zone) OWNER TO postgres;

--
-- Name: nodes_overview(interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.nodes_overview(p_dead_after interval DEFAULT '00:00:10'::interval) RETURNS TABLE(node_id integer, mode text, last_seen timestamp with time zone, alive boolean, leader boolean, processors bigint, pending bigint, pinned bigint, hostname text, version text, decommissioned_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH q AS (
    SELECT COALESCE(q.run_in_node, q.owner_node) AS node,
           count(*) FILTER (WHERE q.run_in_node IS NULL) AS pending,
           count(*) FILTER (WHERE q.run_in_node IS NOT NULL) AS pinned
      FROM pgrelay.queue q WHERE q.dispatched_at IS NULL
     GROUP BY 1
  )
  SELECT n.node_id, n.mode, n.last_seen,
         n.last_seen >= now() - p_dead_after AND n.decommissioned_at IS NULL,
         COALESCE((SELECT h.leader_node = n.node_id FROM pgrelay._lease_holder(now()) h), false),
         (SELECT count(*) FROM pgrelay.processors p WHERE p.node_id = n.node_id),
         COALESCE(q.pending, 0), COALESCE(q.pinned, 0), n.hostname, n.version, n.decommissioned_at
    FROM pgrelay.nodes n LEFT JOIN q ON q.node = n.node_id
   WHERE n.node_id >= 0
   ORDER BY n.node_id
$$;


ALTER FUNCTION pgrelay.nodes_overview(p_dead_after interval) OWNER TO postgres;

--
-- Name: notify(text, text, timestamp with time zone, interval, integer, text, interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, p_delay interval DEFAULT NULL::interval, p_priority integer DEFAULT NULL::integer, p_key text DEFAULT NULL::text, p_unique_for interval DEFAULT NULL::interval) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  v_id bigint;
  v_due timestamptz;
BEGIN
  IF NOT pgrelay._payload_ok(p_payload) THEN
    PERFORM pgrelay._check_payload(p_channel, p_payload);
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    RETURN pgrelay._enqueue_unique(ch, COALESCE(p_key, p_payload), p_payload, v_due,
                                   pgrelay._unique_for(p_unique_for));
  END IF;
  IF ch.deduplicate THEN
    RETURN pgrelay._enqueue_dedup(ch, p_payload, v_due);
  END IF;
  v_id := pgrelay._next_id();
  PERFORM pgrelay._enqueue(ch, ARRAY[v_id], ARRAY[p_payload], v_due);
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) OWNER TO postgres;

--
-- Name: notify_many(text, text[], timestamp with time zone, interval, integer, text[], interval); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone DEFAULT NULL::timestamp with time zone, p_delay interval DEFAULT NULL::interval, p_priority integer DEFAULT NULL::integer, p_key text[] DEFAULT NULL::text[], p_unique_for interval DEFAULT NULL::interval) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ch pgrelay.channels := pgrelay._check_notify(p_channel);
  p text;
  v_ids bigint[];
  v_due timestamptz;
  v_for interval;
  r record;
BEGIN
  IF p_payloads IS NULL THEN
    RAISE EXCEPTION 'pgrelay.notify_many: payloads must not be NULL' USING ERRCODE = 'PR005';
  END IF;
  IF EXISTS (SELECT FROM pg_catalog.unnest(p_payloads) AS u(p) WHERE NOT pgrelay._payload_ok(u.p)) THEN
    FOREACH p IN ARRAY p_payloads LOOP
      PERFORM pgrelay._check_payload(p_channel, p);
    END LOOP;
  END IF;
  IF p_not_before IS NOT NULL OR p_delay IS NOT NULL THEN
    v_due := pgrelay._due(p_not_before, p_delay);
  END IF;
  IF p_priority IS NOT NULL THEN
    ch.priority := pgrelay._priority_of(p_priority);
  END IF;
  IF p_key IS NOT NULL OR p_unique_for IS NOT NULL THEN
    IF pg_catalog.cardinality(p_key) <> pg_catalog.cardinality(p_payloads) THEN
      RAISE EXCEPTION 'pgrelay.notify_many: % keys for % payloads', pg_catalog.cardinality(p_key),
        pg_catalog.cardinality(p_payloads) USING ERRCODE = 'PR111',
        HINT = 'Give one key per payload (NULL: the payload is its key).';
    END IF;
    v_for := pgrelay._unique_for(p_unique_for);
    FOR r IN
      SELECT u.payload, u.key
        FROM ROWS FROM (pg_catalog.unnest(p_payloads), pg_catalog.unnest(p_key)) WITH ORDINALITY AS u(payload, key, n)
       ORDER BY u.n
    LOOP
      RETURN NEXT pgrelay._enqueue_unique(ch, COALESCE(r.key, r.payload), r.payload, v_due, v_for);
    END LOOP;
    RETURN;
  END IF;
  IF ch.deduplicate THEN
    FOREACH p IN ARRAY p_payloads LOOP
      RETURN NEXT pgrelay._enqueue_dedup(ch, p, v_due);
    END LOOP;
    RETURN;
  END IF;
  IF pg_catalog.cardinality(p_payloads) = 0 THEN
    RETURN;
  END IF;
  v_ids := pgrelay._next_ids(pg_catalog.cardinality(p_payloads));
  PERFORM pgrelay._enqueue(ch, v_ids, p_payloads, v_due);
  RETURN QUERY SELECT u.id FROM pg_catalog.unnest(v_ids) AS u(id);
END
$$;


ALTER FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) OWNER TO postgres;

--
-- Name: publish_backlog(integer); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.publish_backlog(p_cap integer DEFAULT 100000) RETURNS TABLE(node_id integer, source text, last_id bigint, backlog bigint, updated_at timestamp with time zone, oldest_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  c pgrelay.publish_cursors;
BEGIN
  FOR c IN SELECT * FROM pgrelay.publish_cursors x ORDER BY x.node_id, x.source LOOP
    node_id := c.node_id;
    source := c.source;
    last_id := c.last_id;
    updated_at := c.updated_at;
    oldest_at := NULL;
    IF c.source = 'log' THEN
      SELECT count(*) INTO backlog
        FROM (SELECT FROM pgrelay.log l WHERE l.node = c.node_id AND l.id > c.last_id
               LIMIT p_cap + 1) x;
      SELECT l.at INTO oldest_at FROM pgrelay.log l
       WHERE l.node = c.node_id AND l.id > c.last_id ORDER BY l.node, l.id LIMIT 1;
    ELSIF pg_catalog.to_regclass('pgrelay_notifier.status_events') IS NOT NULL THEN
      EXECUTE 'SELECT count(*) FROM (SELECT FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 LIMIT $3) x'
        INTO backlog USING c.node_id, c.last_id, p_cap + 1;
      EXECUTE 'SELECT s.at FROM pgrelay_notifier.status_events s
                WHERE s.node = $1 AND s.id > $2 ORDER BY s.node, s.id LIMIT 1'
        INTO oldest_at USING c.node_id, c.last_id;
    ELSE
      backlog := 0;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$_$;


ALTER FUNCTION pgrelay.publish_backlog(p_cap integer) OWNER TO postgres;

--
-- Name: queue_stats(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.queue_stats() RETURNS TABLE(channel text, pending bigint, pending_restricted bigint, in_flight bigint, retrying bigint, oldest_pending timestamp with time zone, kind text, concurrency_mode text, paused boolean, pending_estimated boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  c pgrelay.channels;
  v_inflight jsonb;
  v_n bigint;
  v_retry bigint;
  v_oldest timestamptz;
  v_plan json;
  v_est bigint;
BEGIN
  SELECT COALESCE(pg_catalog.jsonb_object_agg(f.channel, f.n), '{}')
    INTO v_inflight
    FROM (SELECT q.channel, count(*) AS n FROM pgrelay.queue q
           WHERE q.dispatched_at IS NOT NULL GROUP BY q.channel) f;
  FOR c IN SELECT * FROM pgrelay.channels x ORDER BY x.channel LOOP
    SELECT count(*), count(*) FILTER (WHERE s.attempt > 1), min(s.enqueued_at)
      INTO v_n, v_retry, v_oldest
      FROM (SELECT q.attempt, q.enqueued_at FROM pgrelay.queue q
             WHERE q.channel = c.channel AND q.dispatched_at IS NULL
             ORDER BY q.not_before LIMIT 100001) s;
    channel := c.channel;
    kind := c.kind;
    concurrency_mode := c.concurrency_mode;
    paused := c.paused;
    oldest_pending := v_oldest;
    in_flight := COALESCE((v_inflight ->> c.channel)::bigint, 0);
    pending_estimated := v_n > 100000;
    IF pending_estimated THEN
      EXECUTE pg_catalog.format('EXPLAIN (FORMAT JSON) SELECT 1 FROM pgrelay.queue q '
                                'WHERE q.channel = %L AND q.dispatched_at IS NULL', c.channel)
        INTO v_plan;
      v_est := GREATEST(v_n, ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric)::bigint);
      retrying := (v_retry::numeric * v_est / v_n)::bigint;
      pending := v_est;
    ELSE
      pending := v_n;
      retrying := v_retry;
    END IF;
    pending_restricted := CASE WHEN c.node_restricted THEN pending ELSE 0 END;
    RETURN NEXT;
  END LOOP;
END
$$;


ALTER FUNCTION pgrelay.queue_stats() OWNER TO postgres;

--
-- Name: register(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text DEFAULT 'sql'::text, p_concurrency_mode text DEFAULT 'none'::text, p_deduplicate boolean DEFAULT false, p_node_restricted boolean DEFAULT false, p_max_attempts integer DEFAULT 5, p_retry_delay interval DEFAULT '00:00:01'::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT '00:00:30'::interval, p_publish_payload boolean DEFAULT false, p_publish_errors text DEFAULT 'class'::text, p_publish_enqueued boolean DEFAULT false, p_priority integer DEFAULT 0, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  c pgrelay.channels;
  old pgrelay.channels;
  v_diff text[] := '{}';
BEGIN
  c.channel := p_channel;
  c.handler := p_handler;
  c.kind := p_kind;
  c.concurrency_mode := p_concurrency_mode;
  c.deduplicate := COALESCE(p_deduplicate, false);
  c.node_restricted := COALESCE(p_node_restricted, false);
  c.max_attempts := p_max_attempts;
  c.retry_delay := p_retry_delay;
  c.expire_after := p_expire_after;
  c.timeout := p_timeout;
  c.publish_payload := COALESCE(p_publish_payload, false);
  c.publish_errors := p_publish_errors;
  c.publish_enqueued := COALESCE(p_publish_enqueued, false);
  c.store_traces := COALESCE(p_store_traces, true);
  PERFORM pgrelay._check_channel(c);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  IF p_rate_period IS NOT NULL AND COALESCE(p_rate_limit, 0) = 0 THEN
    RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit', p_channel USING ERRCODE = 'PR019';
  END IF;
  c.priority := COALESCE(p_priority, 0);
  c.max_in_flight := NULLIF(p_max_in_flight, 0);
  c.rate_limit := NULLIF(p_rate_limit, 0);
  c.rate_period := CASE WHEN c.rate_limit IS NOT NULL THEN COALESCE(p_rate_period, interval '1 second') END;
  LOOP
    INSERT INTO pgrelay.channels (channel, handler, kind, concurrency_mode, deduplicate,
                                  node_restricted, max_attempts, retry_delay, expire_after, timeout,
                                  publish_payload, publish_errors, publish_enqueued,
                                  priority, max_in_flight, rate_limit, rate_period, store_traces)
    VALUES (c.channel, c.handler, c.kind, c.concurrency_mode, c.deduplicate,
            c.node_restricted, c.max_attempts, c.retry_delay, c.expire_after, c.timeout,
            c.publish_payload, c.publish_errors, c.publish_enqueued,
            c.priority, c.max_in_flight, c.rate_limit, c.rate_period, c.store_traces)
    ON CONFLICT (channel) DO NOTHING;
    IF FOUND THEN
      RETURN;
    END IF;
    SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel;
    EXIT WHEN FOUND;
    -- Unregistered between the two statements: insert again.
  END LOOP;
  IF old.handler IS DISTINCT FROM c.handler THEN
    v_diff := v_diff || pg_catalog.format('handler (%s registered, %s given)',
      pg_catalog.quote_literal(old.handler), pg_catalog.quote_literal(c.handler));
  END IF;
  IF old.kind IS DISTINCT FROM c.kind THEN
    v_diff := v_diff || pg_catalog.format('kind (%s registered, %s given)', old.kind, c.kind);
  END IF;
  IF old.concurrency_mode IS DISTINCT FROM c.concurrency_mode THEN
    v_diff := v_diff || pg_catalog.format('concurrency_mode (%s registered, %s given)',
      old.concurrency_mode, c.concurrency_mode);
  END IF;
  IF old.deduplicate IS DISTINCT FROM c.deduplicate THEN
    v_diff := v_diff || pg_catalog.format('deduplicate (%s registered, %s given)', old.deduplicate, c.deduplicate);
  END IF;
  IF old.node_restricted IS DISTINCT FROM c.node_restricted THEN
    v_diff := v_diff || pg_catalog.format('node_restricted (%s registered, %s given)',
      old.node_restricted, c.node_restricted);
  END IF;
  IF old.max_attempts IS DISTINCT FROM c.max_attempts THEN
    v_diff := v_diff || pg_catalog.format('max_attempts (%s registered, %s given)', old.max_attempts, c.max_attempts);
  END IF;
  IF old.retry_delay IS DISTINCT FROM c.retry_delay THEN
    v_diff := v_diff || pg_catalog.format('retry_delay (%s registered, %s given)', old.retry_delay, c.retry_delay);
  END IF;
  IF old.expire_after IS DISTINCT FROM c.expire_after THEN
    v_diff := v_diff || pg_catalog.format('expire_after (%s registered, %s given)',
      COALESCE(old.expire_after::text, 'NULL'), COALESCE(c.expire_after::text, 'NULL'));
  END IF;
  IF old.timeout IS DISTINCT FROM c.timeout THEN
    v_diff := v_diff || pg_catalog.format('timeout (%s registered, %s given)', old.timeout, c.timeout);
  END IF;
  IF old.publish_payload IS DISTINCT FROM c.publish_payload THEN
    v_diff := v_diff || pg_catalog.format('publish_payload (%s registered, %s given)',
      old.publish_payload, c.publish_payload);
  END IF;
  IF old.publish_errors IS DISTINCT FROM c.publish_errors THEN
    v_diff := v_diff || pg_catalog.format('publish_errors (%s registered, %s given)',
      old.publish_errors, c.publish_errors);
  END IF;
  IF old.publish_enqueued IS DISTINCT FROM c.publish_enqueued THEN
    v_diff := v_diff || pg_catalog.format('publish_enqueued (%s registered, %s given)',
      old.publish_enqueued, c.publish_enqueued);
  END IF;
  IF old.priority IS DISTINCT FROM c.priority THEN
    v_diff := v_diff || pg_catalog.format('priority (%s registered, %s given)', old.priority, c.priority);
  END IF;
  IF old.max_in_flight IS DISTINCT FROM c.max_in_flight THEN
    v_diff := v_diff || pg_catalog.format('max_in_flight (%s registered, %s given)',
      COALESCE(old.max_in_flight::text, 'NULL'), COALESCE(c.max_in_flight::text, 'NULL'));
  END IF;
  IF old.rate_limit IS DISTINCT FROM c.rate_limit OR old.rate_period IS DISTINCT FROM c.rate_period THEN
    v_diff := v_diff || pg_catalog.format('rate limit (%s per %s registered, %s per %s given)',
      COALESCE(old.rate_limit::text, 'NULL'), COALESCE(old.rate_period::text, 'NULL'),
      COALESCE(c.rate_limit::text, 'NULL'), COALESCE(c.rate_period::text, 'NULL'));
  END IF;
  IF old.store_traces IS DISTINCT FROM c.store_traces THEN
    v_diff := v_diff || pg_catalog.format('store_traces (%s registered, %s given)', old.store_traces, c.store_traces);
  END IF;
  IF pg_catalog.cardinality(v_diff) > 0 THEN
    RAISE EXCEPTION 'pgrelay: channel % already exists with a different definition: %',
      pg_catalog.quote_literal(p_channel), pg_catalog.array_to_string(v_diff, ', ')
      USING ERRCODE = 'PR003',
            HINT = 'Use pgrelay.update() to change it; registering an identical definition again is a no-op.';
  END IF;
END
$$;


ALTER FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) OWNER TO postgres;

--
-- Name: retry(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.retry(p_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN pgrelay._retry_dead(pgrelay._take_dead_letter(p_id, 'pgrelay.retry'));
END
$$;


ALTER FUNCTION pgrelay.retry(p_id bigint) OWNER TO postgres;

--
-- Name: retry_all(text, timestamp with time zone); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  dl pgrelay.dead_letters;
  n bigint := 0;
BEGIN
  IF p_channel IS NULL THEN
    RAISE EXCEPTION 'pgrelay.retry_all: channel must not be NULL' USING ERRCODE = 'PR001';
  END IF;
  FOR dl IN
    WITH x AS (
      DELETE FROM pgrelay.dead_letters d
       WHERE d.id IN (SELECT y.id FROM pgrelay.dead_letters y
                       WHERE y.channel = p_channel AND (p_since IS NULL OR y.ended_at >= p_since)
                       ORDER BY y.ended_at, y.id
                         FOR UPDATE SKIP LOCKED)
      RETURNING d.*
    )
    SELECT * FROM x ORDER BY x.ended_at, x.id
  LOOP
    PERFORM pgrelay._retry_dead(dl);
    n := n + 1;
  END LOOP;
  RETURN n;
END
$$;


ALTER FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone) OWNER TO postgres;

--
-- Name: schedule(text, text, text, interval, text, text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval DEFAULT NULL::interval, p_cron text DEFAULT NULL::text, p_timezone text DEFAULT 'UTC'::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  v_why text;
BEGIN
  IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9_.:-]{1,100}$' THEN
    RAISE EXCEPTION 'pgrelay.schedule: invalid schedule name %', COALESCE(pg_catalog.quote_literal(p_name), 'NULL')
      USING ERRCODE = 'PR060', HINT = 'A name is 1 to 100 of A-Z a-z 0-9 _ . : -';
  END IF;
  IF p_channel IS NULL OR NOT EXISTS (SELECT FROM pgrelay.channels c WHERE c.channel = p_channel) THEN
    RAISE EXCEPTION 'pgrelay.schedule: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001', HINT = 'Register it first: pgrelay.register().';
  END IF;
  IF p_payload IS NULL THEN
    RAISE EXCEPTION 'pgrelay.schedule: the payload is NULL' USING ERRCODE = 'PR005';
  END IF;
  IF (p_every IS NULL) = (p_cron IS NULL) THEN
    RAISE EXCEPTION 'pgrelay.schedule: give exactly one of p_every and p_cron'
      USING ERRCODE = 'PR061';
  END IF;
  IF p_every IS NOT NULL AND (p_every < interval '1 second'
       OR pg_catalog.date_part('year', p_every) < 0 OR pg_catalog.date_part('month', p_every) < 0
       OR pg_catalog.date_part('day', p_every) < 0
       OR p_every - pg_catalog.make_interval(years => pg_catalog.date_part('year', p_every)::int,
                                             months => pg_catalog.date_part('month', p_every)::int,
                                             days => pg_catalog.date_part('day', p_every)::int) < interval '0') THEN
    RAISE EXCEPTION 'pgrelay.schedule: p_every must be at least 1 second, with no negative part; got %', p_every
      USING ERRCODE = 'PR062';
  END IF;
  IF p_cron IS NOT NULL THEN
    v_why := pgrelay._cron_error(p_cron);
    IF v_why IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay.schedule: invalid cron expression %: %', pg_catalog.quote_literal(p_cron), v_why
        USING ERRCODE = 'PR063',
        HINT = 'Five fields (minute hour day-of-month month day-of-week), as "0 3 * * *", or @daily, @hourly, ...';
    END IF;
  END IF;
  IF p_timezone IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_timezone_names z WHERE z.name = p_timezone) THEN
    RAISE EXCEPTION 'pgrelay.schedule: unknown time zone %', COALESCE(pg_catalog.quote_literal(p_timezone), 'NULL')
      USING ERRCODE = 'PR064', HINT = 'A name of pg_timezone_names, as ''UTC'' or ''Europe/Paris''.';
  END IF;

  INSERT INTO pgrelay.schedule_defs AS s (name, channel, payload, every, cron, timezone, next_fire)
  VALUES (p_name, p_channel, p_payload, p_every, p_cron, p_timezone,
          CASE WHEN p_every IS NOT NULL THEN now() + p_every END)
  ON CONFLICT (name) DO UPDATE
    SET channel = EXCLUDED.channel, payload = EXCLUDED.payload, updated_at = now(), last_error = NULL,
        every = EXCLUDED.every, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
        anchor = CASE WHEN (s.every, s.cron, s.timezone) IS NOT DISTINCT FROM (EXCLUDED.every, EXCLUDED.cron, EXCLUDED.timezone)
                      THEN s.anchor ELSE now() END,
        next_fire = CASE WHEN (s.every, s.cron, s.timezone) IS NOT DISTINCT FROM (EXCLUDED.every, EXCLUDED.cron, EXCLUDED.timezone)
                         THEN s.next_fire ELSE EXCLUDED.next_fire END;
END
$_$;


ALTER FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text) OWNER TO postgres;

--
-- Name: status(bigint); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.status(p_id bigint) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v text;
BEGIN
  SELECT CASE WHEN q.dispatched_at IS NOT NULL THEN 'in_flight'
              WHEN q.attempt > 1 THEN 'retrying'
              ELSE 'pending' END
    INTO v
    FROM pgrelay.queue q
   WHERE (q.id = p_id AND q.origin_id = p_id)
      OR (q.origin_id = p_id AND q.retry_of IS NOT NULL)
   ORDER BY q.attempt DESC
   LIMIT 1;
  IF FOUND THEN
    RETURN v;
  END IF;
  SELECT l.event INTO v
    FROM pgrelay.log l
   WHERE l.origin_id = p_id AND l.event IN ('succeeded', 'gave_up', 'expired', 'deduplicated', 'cancelled')
   ORDER BY l.id DESC
   LIMIT 1;
  RETURN v;
END
$$;


ALTER FUNCTION pgrelay.status(p_id bigint) OWNER TO postgres;

--
-- Name: unhandled_go_channels(); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.unhandled_go_channels() RETURNS TABLE(channel text, handler text, pending bigint)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT c.channel, c.handler,
         (SELECT count(*) FROM pgrelay.queue q WHERE q.channel = c.channel AND q.dispatched_at IS NULL)
    FROM pgrelay.channels c
   WHERE c.kind = 'go'
     AND NOT EXISTS (SELECT FROM pgrelay.go_handlers g JOIN pgrelay.processors p
                              ON p.processor_id = g.processor_id
                      WHERE g.handler = c.handler)
   ORDER BY c.channel
$$;


ALTER FUNCTION pgrelay.unhandled_go_channels() OWNER TO postgres;

--
-- Name: unregister(text, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.unregister(p_channel text, p_force boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n bigint;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  PERFORM FROM pgrelay.channels x WHERE x.channel = p_channel;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  SELECT count(*) INTO n FROM pgrelay.queue q WHERE q.channel = p_channel;
  IF n > 0 AND NOT COALESCE(p_force, false) THEN
    RAISE EXCEPTION 'pgrelay: channel % still has % pending or in-flight events', p_channel, n
      USING ERRCODE = 'PR004', HINT = 'Wait for them, or pass p_force := true to discard them.';
  END IF;
  -- A completion that holds a row of the channel makes the DELETE wait, and
  -- the retry row it commits is not in the DELETE's snapshot: delete again
  -- until a new snapshot sees no row. (Producers are held off by the lock;
  -- a retry only comes from a row that was visible, so this ends.)
  LOOP
    DELETE FROM pgrelay.queue q WHERE q.channel = p_channel;
    EXIT WHEN NOT EXISTS (SELECT FROM pgrelay.queue q WHERE q.channel = p_channel);
  END LOOP;
  DELETE FROM pgrelay.channels x WHERE x.channel = p_channel;
  DELETE FROM pgrelay.channel_locks l WHERE l.channel = p_channel;
END
$$;


ALTER FUNCTION pgrelay.unregister(p_channel text, p_force boolean) OWNER TO postgres;

--
-- Name: unschedule(text); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.unschedule(p_name text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM pgrelay.schedule_defs s WHERE s.name = p_name;
  RETURN FOUND;
END
$$;


ALTER FUNCTION pgrelay.unschedule(p_name text) OWNER TO postgres;

--
-- Name: update(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, boolean, text, boolean, integer, integer, integer, interval, boolean); Type: FUNCTION; Schema: pgrelay; Owner: postgres
--

CREATE FUNCTION pgrelay.update(p_channel text, p_handler text DEFAULT NULL::text, p_kind text DEFAULT NULL::text, p_concurrency_mode text DEFAULT NULL::text, p_deduplicate boolean DEFAULT NULL::boolean, p_node_restricted boolean DEFAULT NULL::boolean, p_max_attempts integer DEFAULT NULL::integer, p_retry_delay interval DEFAULT NULL::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT NULL::interval, p_paused boolean DEFAULT NULL::boolean, p_publish_payload boolean DEFAULT NULL::boolean, p_publish_errors text DEFAULT NULL::text, p_publish_enqueued boolean DEFAULT NULL::boolean, p_priority integer DEFAULT NULL::integer, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  old pgrelay.channels;
  c pgrelay.channels;
BEGIN
  PERFORM pgrelay._lock_channel_exclusive(p_channel);
  SELECT * INTO old FROM pgrelay.channels x WHERE x.channel = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay: unknown channel %', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR001';
  END IF;
  c := old;
  c.handler := COALESCE(p_handler, old.handler);
  c.kind := COALESCE(p_kind, old.kind);
  c.concurrency_mode := COALESCE(p_concurrency_mode, old.concurrency_mode);
  c.deduplicate := COALESCE(p_deduplicate, old.deduplicate);
  c.node_restricted := COALESCE(p_node_restricted, old.node_restricted);
  c.max_attempts := COALESCE(p_max_attempts, old.max_attempts);
  c.retry_delay := COALESCE(p_retry_delay, old.retry_delay);
  c.expire_after := CASE WHEN p_expire_after IS NULL THEN old.expire_after
                         WHEN p_expire_after = interval '0' THEN NULL
                         ELSE p_expire_after END;
  c.timeout := COALESCE(p_timeout, old.timeout);
  c.paused := COALESCE(p_paused, old.paused);
  c.publish_payload := COALESCE(p_publish_payload, old.publish_payload);
  c.publish_errors := COALESCE(p_publish_errors, old.publish_errors);
  c.publish_enqueued := COALESCE(p_publish_enqueued, old.publish_enqueued);
  c.store_traces := COALESCE(p_store_traces, old.store_traces);
  -- The handler is re-checked only when it or the kind changes: pausing a
  -- channel whose handler's function was dropped must still work.
  PERFORM pgrelay._check_channel(c, c.handler IS DISTINCT FROM old.handler OR c.kind IS DISTINCT FROM old.kind);
  PERFORM pgrelay._check_flow(p_channel, p_priority, p_max_in_flight, p_rate_limit, p_rate_period);
  c.priority := COALESCE(p_priority, old.priority);
  c.max_in_flight := CASE WHEN p_max_in_flight IS NULL THEN old.max_in_flight
                          ELSE NULLIF(p_max_in_flight, 0) END;
  IF p_rate_limit = 0 THEN
    IF p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (p_rate_limit := 0 removes it)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_limit := NULL;
    c.rate_period := NULL;
  ELSE
    c.rate_limit := COALESCE(p_rate_limit, old.rate_limit);
    IF c.rate_limit IS NULL AND p_rate_period IS NOT NULL THEN
      RAISE EXCEPTION 'pgrelay: channel %: rate_period needs a rate_limit (the channel has none)',
        p_channel USING ERRCODE = 'PR019';
    END IF;
    c.rate_period := CASE WHEN c.rate_limit IS NOT NULL
                          THEN COALESCE(p_rate_period, old.rate_period, interval '1 second') END;
  END IF;
  UPDATE pgrelay.channels x
     SET handler = c.handler, kind = c.kind, concurrency_mode = c.concurrency_mode,
         deduplicate = c.deduplicate, node_restricted = c.node_restricted,
         max_attempts = c.max_attempts, retry_delay = c.retry_delay,
         expire_after = c.expire_after, timeout = c.timeout, paused = c.paused,
         publish_payload = c.publish_payload, publish_errors = c.publish_errors,
         publish_enqueued = c.publish_enqueued, priority = c.priority,
         max_in_flight = c.max_in_flight, rate_limit = c.rate_limit, rate_period = c.rate_period,
         store_traces = c.store_traces, updated_at = now()
   WHERE x.channel = p_channel;
  -- Rows not yet dispatched follow the new settings.
  --
  -- Rows in flight keep their claim, but take the new lane too: a channel
  -- made serialised must count what is already running as its lane's
  -- in-flight row, or the next claim starts a second one beside it. They are
  -- updated whenever a derived setting changes, so that each is locked until
  -- this transaction ends: a completion that comes meanwhile waits, and its
  -- retry row is then derived from the new settings.
  --
  -- A completion that already held a row makes these statements wait, and
  -- the retry row it commits is not in their snapshot: re-derive until a new
  -- snapshot sees no row with the old values. (Producers are held off by the
  -- channel lock; a retry only comes from a row that was visible.)
  -- A new default priority is for the events enqueued from now on: those
  -- queued keep theirs.
  IF c.concurrency_mode IS DISTINCT FROM old.concurrency_mode
     OR c.deduplicate IS DISTINCT FROM old.deduplicate
     OR c.node_restricted IS DISTINCT FROM old.node_restricted THEN
    LOOP
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload),
             phash = pgrelay._phash_of(c.deduplicate, q.payload),
             run_in_node = CASE WHEN c.node_restricted THEN COALESCE(q.run_in_node, q.owner_node) END
       WHERE q.channel = p_channel AND q.dispatched_at IS NULL;
      UPDATE pgrelay.queue q
         SET lane = pgrelay._lane_of(c.concurrency_mode, q.payload)
       WHERE q.channel = p_channel AND q.dispatched_at IS NOT NULL;
      EXIT WHEN NOT EXISTS (
        SELECT FROM pgrelay.queue q
         WHERE q.channel = p_channel
           AND (q.lane IS DISTINCT FROM pgrelay._lane_of(c.concurrency_mode, q.payload)
                OR (q.dispatched_at IS NULL
                    AND (q.phash IS DISTINCT FROM pgrelay._phash_of(c.deduplicate, q.payload)
                         OR (q.run_in_node IS NULL) = c.node_restricted))));
    END LOOP;
  END IF;
END
$$;


ALTER FUNCTION pgrelay.update(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_paused boolean, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) OWNER TO postgres;

--
-- Name: _caller(); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._caller() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN pg_catalog.current_setting('role') = 'none' THEN SESSION_USER::text
              ELSE pg_catalog.current_setting('role') END
$$;


ALTER FUNCTION pgrelay_notifier._caller() OWNER TO pgrelay_notifier;

--
-- Name: _cancel_for_events(bigint[], text[], text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_ids bigint[];
  v_channels text[];
BEGIN
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = 'cancelled', updated_at = pg_catalog.clock_timestamp()
      FROM unnest(p_notification_ids, p_channels) AS e(id, channel)
     WHERE n.notification_id = e.id AND n.channel = e.channel AND n.status IN ('queued', 'sending')
    RETURNING n.notification_id, n.channel
  )
  SELECT pg_catalog.array_agg(c.notification_id ORDER BY c.notification_id),
         pg_catalog.array_agg(c.channel ORDER BY c.notification_id)
    INTO v_ids, v_channels FROM c;
  IF v_ids IS NOT NULL THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, 'cancelled', p_reason);
  END IF;
END
$$;


ALTER FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) OWNER TO pgrelay_notifier;

--
-- Name: _check_address(text, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  -- RFC 5322 3.2.3 atext, 3.2.4 quoted-string (qtext / quoted-pair, spaces
  -- allowed).
  atext  constant text := '[A-Za-z0-9!#$%&''*+/=?^_`{|}~-]';
  quoted constant text := '"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"';
  -- IP addresses as Go's netip.ParseAddr reads them (RFC 3986's IPv6address
  -- grammar; IPv4 octets without leading zeros).
  h16    constant text := '[0-9A-Fa-f]{1,4}';
  dec    constant text := '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
  v_ipv4 text := dec || '(?:\.' || dec || '){3}';
  v_ls32 text := '(?:' || h16 || ':' || h16 || '|' || v_ipv4 || ')';
  v_ipv6 text := '(?:(?:' || h16 || ':){6}' || v_ls32
    || '|::(?:' || h16 || ':){5}' || v_ls32
    || '|(?:' || h16 || ')?::(?:' || h16 || ':){4}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,1}' || h16 || ')?::(?:' || h16 || ':){3}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,2}' || h16 || ')?::(?:' || h16 || ':){2}' || v_ls32
    || '|(?:(?:' || h16 || ':){0,3}' || h16 || ')?::' || h16 || ':' || v_ls32
    || '|(?:(?:' || h16 || ':){0,4}' || h16 || ')?::' || v_ls32
    || '|(?:(?:' || h16 || ':){0,5}' || h16 || ')?::' || h16
    || '|(?:(?:' || h16 || ':){0,6}' || h16 || ')?::)';
  v_local  text := '(?:' || atext || '+(?:\.' || atext || '+)*|' || quoted || ')';
  v_domain text := '(?:' || atext || '+(?:\.' || atext || '+)*|\[(?:' || v_ipv4 || '|' || v_ipv6 || ')\])';
  -- A display name: words (atoms, which may contain '.' as RFC 5322's
  -- obs-phrase allows, or quoted strings) separated by blanks.
  v_word   text := '(?:(?:' || atext || '|[.]|[^\x01-\x7f])+|' || quoted || ')';
  v_addr   text;
  v_name   text;
  m        text[];
BEGIN
  IF p_addr IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier: % address is NULL', p_field USING ERRCODE = 'PR102';
  END IF;
  m := pg_catalog.regexp_match(p_addr,
         '^[ \t]*(?:' || v_word || '(?:[ \t]+' || v_word || ')*[ \t]*)?<(' || v_local || '@' || v_domain || ')>[ \t]*$');
  IF m IS NOT NULL THEN
    v_addr := m[1];
  ELSIF p_addr ~ ('^' || v_local || '@' || v_domain || '$') THEN
    v_addr := p_addr;
  ELSE
    RAISE EXCEPTION 'pgrelay_notifier: % address % is not a valid RFC 5322 address', p_field,
      pg_catalog.quote_literal(p_addr) USING ERRCODE = 'PR102',
      HINT = 'Write local@domain or "Display Name <local@domain>"; a domain literal must be an IP address, e.g. [192.0.2.1].';
  END IF;
  IF pg_catalog.octet_length(v_addr) > 254
     OR pg_catalog.octet_length(pg_catalog.substr(v_addr, 1,
          pg_catalog.length(v_addr) - pg_catalog.strpos(pg_catalog.reverse(v_addr), '@'))) > 64 THEN
    RAISE EXCEPTION 'pgrelay_notifier: % address % is too long (RFC 5321: at most 64 octets before the "@", 254 in all)',
      p_field, pg_catalog.quote_literal(p_addr) USING ERRCODE = 'PR102';
  END IF;
  IF m IS NOT NULL THEN
    -- The display name: what precedes "<addr-spec>" (and the blanks after it).
    v_name := pg_catalog.rtrim(p_addr, E' \t');
    v_name := pg_catalog.btrim(pg_catalog.substr(v_name, 1,
                pg_catalog.length(v_name) - pg_catalog.length(v_addr) - 2), E' \t');
    IF pg_catalog.octet_length(v_name) > 256 THEN
      RAISE EXCEPTION 'pgrelay_notifier: the display name of % address <%> is % bytes, over the limit of 256',
        p_field, v_addr, pg_catalog.octet_length(v_name) USING ERRCODE = 'PR102';
    END IF;
  END IF;
END
$_$;


ALTER FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) OWNER TO pgrelay_notifier;

--
-- Name: _check_addresses(text, text[]); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._check_addresses(p_field text, p_addrs text[]) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  a text;
BEGIN
  FOREACH a IN ARRAY COALESCE(p_addrs, '{}') LOOP
    PERFORM pgrelay_notifier._check_address(p_field, a);
  END LOOP;
END
$$;


ALTER FUNCTION pgrelay_notifier._check_addresses(p_field text, p_addrs text[]) OWNER TO pgrelay_notifier;

--
-- Name: _check_headers(jsonb); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  k text;
  v jsonb;
  v_n int := 0;
  v_bytes bigint := 0;
BEGIN
  IF p_headers IS NULL THEN
    RETURN;
  END IF;
  IF pg_catalog.jsonb_typeof(p_headers) <> 'object' THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: headers must be a JSON object, got %',
      pg_catalog.jsonb_typeof(p_headers) USING ERRCODE = 'PR105';
  END IF;
  FOR k, v IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(p_headers) e LOOP
    IF k !~ '^[\x21-\x39\x3b-\x7e]{1,76}$' THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header name % is invalid (1 to 76 printable ASCII characters, no ":")',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    IF pg_catalog.lower(k) IN ('from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id',
                               'mime-version', 'content-type', 'content-transfer-encoding',
                               'sender', 'return-path') THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header % is set by the notifier and cannot be given in p_headers',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    IF pg_catalog.jsonb_typeof(v) <> 'string' THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: header % must have a string value, got %',
        pg_catalog.quote_literal(k), pg_catalog.jsonb_typeof(v) USING ERRCODE = 'PR105';
    END IF;
    IF (v #>> '{}') ~ '[\r\n]' OR pg_catalog.octet_length(v #>> '{}') > 900 THEN
      RAISE EXCEPTION 'pgrelay_notifier.send: the value of header % contains CR or LF or is over 900 bytes',
        pg_catalog.quote_literal(k) USING ERRCODE = 'PR105';
    END IF;
    v_n := v_n + 1;
    v_bytes := v_bytes + pg_catalog.octet_length(k) + pg_catalog.octet_length(v #>> '{}');
  END LOOP;
  IF v_n > 50 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % custom headers, over the limit of 50', v_n
      USING ERRCODE = 'PR105';
  END IF;
  IF v_bytes > 16384 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the custom headers are % bytes (names and values), over the limit of 16384',
      v_bytes USING ERRCODE = 'PR105';
  END IF;
END
$_$;


ALTER FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) OWNER TO pgrelay_notifier;

--
-- Name: _event(bigint[], text[], text, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._event(p_notification_ids bigint[], p_channels text[], p_status text, p_error text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status, error)
  SELECT e.id, e.channel, p_status, p_error
    FROM unnest(p_notification_ids, p_channels) WITH ORDINALITY AS e(id, channel, ord)
   ORDER BY e.ord
$$;


ALTER FUNCTION pgrelay_notifier._event(p_notification_ids bigint[], p_channels text[], p_status text, p_error text) OWNER TO pgrelay_notifier;

--
-- Name: _may_see(text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier._may_see(p_sent_by text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, 'pgrelay_admin', 'MEMBER')
      OR EXISTS (SELECT FROM pg_catalog.pg_roles r
                  WHERE r.rolname = p_sent_by
                    AND pg_catalog.pg_has_role(pgrelay_notifier._caller()::name, r.oid, 'MEMBER'))
$$;


ALTER FUNCTION pgrelay_notifier._may_see(p_sent_by text) OWNER TO pgrelay_notifier;

--
-- Name: cancel(bigint); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_channel text;
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'cancelled', updated_at = clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.status = 'queued'
     AND pgrelay_notifier._may_see(n.sent_by)
  RETURNING n.channel INTO v_channel;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[v_channel], 'cancelled', NULL);
  PERFORM pgrelay._cancel_email_event(p_notification_id, v_channel, pgrelay_notifier._caller());
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) OWNER TO pgrelay_notifier;

--
-- Name: create_channel(text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text, boolean, integer, integer, integer, interval, boolean); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text DEFAULT 'none'::text, p_deduplicate boolean DEFAULT false, p_node_restricted boolean DEFAULT false, p_max_attempts integer DEFAULT 10, p_retry_delay interval DEFAULT '00:00:10'::interval, p_expire_after interval DEFAULT NULL::interval, p_timeout interval DEFAULT '00:00:30'::interval, p_publish_payload boolean DEFAULT false, p_publish_errors text DEFAULT 'class'::text, p_publish_enqueued boolean DEFAULT false, p_priority integer DEFAULT 0, p_max_in_flight integer DEFAULT NULL::integer, p_rate_limit integer DEFAULT NULL::integer, p_rate_period interval DEFAULT NULL::interval, p_store_traces boolean DEFAULT NULL::boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM pgrelay_notifier._check_address('from', p_from);
  PERFORM pgrelay.register(
    p_channel := p_channel,
    p_handler := pg_catalog.btrim(p_from),
    p_kind := 'email',
    p_concurrency_mode := p_concurrency_mode,
    p_deduplicate := p_deduplicate,
    p_node_restricted := p_node_restricted,
    p_max_attempts := p_max_attempts,
    p_retry_delay := p_retry_delay,
    p_expire_after := p_expire_after,
    p_timeout := p_timeout,
    p_publish_payload := p_publish_payload,
    p_publish_errors := p_publish_errors,
    p_publish_enqueued := p_publish_enqueued,
    p_priority := p_priority,
    p_max_in_flight := p_max_in_flight,
    p_rate_limit := p_rate_limit,
    p_rate_period := p_rate_period,
    p_store_traces := p_store_traces);
END
$$;


ALTER FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) OWNER TO pgrelay_notifier;

--
-- Name: debug_log(bigint, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH ins AS (
    INSERT INTO pgrelay_notifier.debug_log (notification_id, message)
    SELECT p_notification_id, pg_catalog.left(COALESCE(p_message, ''), 4000)
     WHERE EXISTS (SELECT FROM pgrelay_notifier.notifications n
                    WHERE n.notification_id = p_notification_id)
    RETURNING id
  ), keep AS (
    -- The statement's snapshot does not see the row ins adds: keep 19 older.
    SELECT d.id FROM pgrelay_notifier.debug_log d
     WHERE d.notification_id = p_notification_id
     ORDER BY d.id DESC
     LIMIT 19
  )
  DELETE FROM pgrelay_notifier.debug_log d
   WHERE d.notification_id = p_notification_id
     AND EXISTS (SELECT FROM ins)
     AND d.id NOT IN (SELECT keep.id FROM keep)
$$;


ALTER FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) OWNER TO pgrelay_notifier;

--
-- Name: fail_for_event(bigint, text, bigint, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = p_notification_id AND n.channel = p_channel
      AND (n.status = 'queued'
           OR (n.status = 'sending' AND (n.sending_event = p_event OR n.sending_event IS NULL)))
      FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN pgrelay_notifier.set_status(p_notification_id, 'failed', p_error);
END
$$;


ALTER FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) OWNER TO pgrelay_notifier;

--
-- Name: fetch(bigint); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) RETURNS TABLE(notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT n.notification_id, n.channel, n.from_addr, n.to_addrs, n.cc_addrs, n.bcc_addrs, n.subject,
         n.body_text, n.body_html, n.headers, n.status, n.attempts, n.created_at
    FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND n.status IN ('queued', 'sending')
$$;


ALTER FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) OWNER TO pgrelay_notifier;

--
-- Name: get_status(bigint); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT n.status FROM pgrelay_notifier.notifications n
   WHERE n.notification_id = p_notification_id AND pgrelay_notifier._may_see(n.sent_by)
$$;


ALTER FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) OWNER TO pgrelay_notifier;

--
-- Name: not_sent(bigint, bigint); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH c AS (
    UPDATE pgrelay_notifier.notifications n SET send_in_doubt = false
     WHERE n.notification_id = p_notification_id AND n.status = 'sending'
       AND n.sending_event = p_event AND n.send_in_doubt
    RETURNING 1
  )
  SELECT EXISTS (SELECT FROM c);
$$;


ALTER FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) OWNER TO pgrelay_notifier;

--
-- Name: requeue(bigint, text, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.requeue(p_notification_id bigint, p_channel text, p_reason text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  UPDATE pgrelay_notifier.notifications n
     SET status = 'queued', sending_event = NULL, send_in_doubt = false,
         updated_at = pg_catalog.clock_timestamp()
   WHERE n.notification_id = p_notification_id AND n.channel = p_channel AND n.status = 'failed';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pgrelay_notifier._event(ARRAY[p_notification_id], ARRAY[p_channel], 'queued', NULL);
  PERFORM pgrelay_notifier.debug_log(p_notification_id, p_reason);
  RETURN true;
END
$$;


ALTER FUNCTION pgrelay_notifier.requeue(p_notification_id bigint, p_channel text, p_reason text) OWNER TO pgrelay_notifier;

--
-- Name: send(text, text[], text, text, text, text[], text[], jsonb); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text DEFAULT NULL::text, p_cc text[] DEFAULT NULL::text[], p_bcc text[] DEFAULT NULL::text[], p_headers jsonb DEFAULT NULL::jsonb) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_from text;
  v_n int;
  v_size bigint;
  v_id bigint;
BEGIN
  SELECT c.handler INTO v_from FROM pgrelay.channels c WHERE c.channel = p_channel AND c.kind = 'email';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % is not an email channel', COALESCE(pg_catalog.quote_literal(p_channel), 'NULL')
      USING ERRCODE = 'PR100', HINT = 'Create it with pgrelay_notifier.create_channel(channel, from_address).';
  END IF;
  IF p_to IS NULL OR COALESCE(pg_catalog.cardinality(p_to), 0) = 0 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the recipient list (p_to) is empty' USING ERRCODE = 'PR101';
  END IF;
  PERFORM pgrelay_notifier._check_addresses('to', p_to);
  PERFORM pgrelay_notifier._check_addresses('cc', p_cc);
  PERFORM pgrelay_notifier._check_addresses('bcc', p_bcc);
  v_n := pg_catalog.cardinality(p_to) + COALESCE(pg_catalog.cardinality(p_cc), 0)
         + COALESCE(pg_catalog.cardinality(p_bcc), 0);
  IF v_n > 100 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: % recipients, over the limit of 100 per email', v_n
      USING ERRCODE = 'PR106';
  END IF;
  IF p_subject IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject is NULL (use an empty string)' USING ERRCODE = 'PR103';
  END IF;
  IF pg_catalog.strpos(p_subject, E'\r') > 0 OR pg_catalog.strpos(p_subject, E'\n') > 0 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject % contains CR or LF', pg_catalog.quote_literal(p_subject)
      USING ERRCODE = 'PR103';
  END IF;
  IF pg_catalog.octet_length(p_subject) > 998 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the subject is % bytes, over the limit of 998',
      pg_catalog.octet_length(p_subject) USING ERRCODE = 'PR103';
  END IF;
  IF p_body_text IS NULL THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the text body is NULL (use an empty string)' USING ERRCODE = 'PR107';
  END IF;
  IF pg_catalog.octet_length(p_body_text) > 1048576 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the text body is % bytes, over the 1 MiB (1048576 bytes) limit',
      pg_catalog.octet_length(p_body_text) USING ERRCODE = 'PR104';
  END IF;
  IF pg_catalog.octet_length(p_body_html) > 1048576 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the HTML body is % bytes, over the 1 MiB (1048576 bytes) limit',
      pg_catalog.octet_length(p_body_html) USING ERRCODE = 'PR104';
  END IF;
  PERFORM pgrelay_notifier._check_headers(p_headers);
  v_size := pg_catalog.octet_length(v_from) + pg_catalog.octet_length(p_subject)
            + pg_catalog.octet_length(p_body_text) + COALESCE(pg_catalog.octet_length(p_body_html), 0)
            + (SELECT COALESCE(sum(pg_catalog.octet_length(a)), 0)
                 FROM unnest(p_to || COALESCE(p_cc, '{}'::text[]) || COALESCE(p_bcc, '{}'::text[])) a)
            + (SELECT COALESCE(sum(pg_catalog.octet_length(e.key) + pg_catalog.octet_length(e.value)), 0)
                 FROM pg_catalog.jsonb_each_text(COALESCE(p_headers, '{}'::jsonb)) e);
  IF v_size > 2097152 THEN
    RAISE EXCEPTION 'pgrelay_notifier.send: the message is % bytes (addresses, subject, bodies and custom headers), over the 2 MiB (2097152 bytes) limit',
      v_size USING ERRCODE = 'PR108';
  END IF;

  INSERT INTO pgrelay_notifier.notifications
    (channel, from_addr, to_addrs, cc_addrs, bcc_addrs, subject, body_text, body_html, headers, sent_by)
  VALUES (p_channel, v_from, p_to, COALESCE(p_cc, '{}'), COALESCE(p_bcc, '{}'), p_subject, p_body_text,
          p_body_html, COALESCE(p_headers, '{}'), pgrelay_notifier._caller())
  RETURNING notification_id INTO v_id;
  PERFORM pgrelay_notifier._event(ARRAY[v_id], ARRAY[p_channel], 'queued', NULL);
  PERFORM pgrelay.notify(p_channel, v_id::text);
  RETURN v_id;
END
$$;


ALTER FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) OWNER TO pgrelay_notifier;

--
-- Name: set_status(bigint, text, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(p_notification_id = ANY (pgrelay_notifier.set_status_many(ARRAY[p_notification_id], p_status, p_error)),
                  false)
$$;


ALTER FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text) OWNER TO pgrelay_notifier;

--
-- Name: set_status_many(bigint[], text, text); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text DEFAULT NULL::text) RETURNS bigint[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_error text := pg_catalog.left(p_error, 8000);
  v_ids bigint[];
  v_channels text[];
BEGIN
  IF p_status IS NULL OR p_status NOT IN ('queued', 'sending', 'sent', 'failed') THEN
    RAISE EXCEPTION 'pgrelay_notifier.set_status: unknown status % (expected sending, sent or failed)',
      COALESCE(pg_catalog.quote_literal(p_status), 'NULL') USING ERRCODE = 'PR110';
  END IF;
  WITH u AS (
    UPDATE pgrelay_notifier.notifications n
       SET status = p_status,
           attempts = n.attempts + CASE WHEN p_status = 'sending' THEN 1 ELSE 0 END,
           last_error = CASE WHEN p_status = 'failed' THEN v_error ELSE n.last_error END,
           sent_at = CASE WHEN p_status = 'sent' THEN pg_catalog.clock_timestamp() ELSE n.sent_at END,
           updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids)
       AND n.status = ANY (CASE p_status WHEN 'sending' THEN ARRAY['queued']
                                         WHEN 'sent' THEN ARRAY['queued', 'sending']
                                         WHEN 'failed' THEN ARRAY['queued', 'sending']
                                         ELSE ARRAY[]::text[] END)
    RETURNING n.notification_id, n.channel
  )
  SELECT COALESCE(pg_catalog.array_agg(u.notification_id ORDER BY u.notification_id), '{}'),
         COALESCE(pg_catalog.array_agg(u.channel ORDER BY u.notification_id), '{}')
    INTO v_ids, v_channels
    FROM u;
  IF pg_catalog.cardinality(v_ids) > 0 THEN
    PERFORM pgrelay_notifier._event(v_ids, v_channels, p_status, CASE WHEN p_status = 'failed' THEN v_error END);
  END IF;
  IF p_status = 'sending' THEN
    UPDATE pgrelay_notifier.notifications n
       SET attempts = n.attempts + 1, updated_at = pg_catalog.clock_timestamp()
     WHERE n.notification_id = ANY (p_notification_ids) AND n.status = 'sending'
       AND NOT n.notification_id = ANY (v_ids);
  END IF;
  RETURN v_ids;
END
$$;


ALTER FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text) OWNER TO pgrelay_notifier;

--
-- Name: start_sending(bigint, text, bigint); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) RETURNS TABLE(verdict text, reason text, notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT s.verdict, s.reason, s.notification_id, s.channel, s.from_addr, s.to_addrs, s.cc_addrs, s.bcc_addrs,
         s.subject, s.body_text, s.body_html, s.headers, s.status, s.attempts, s.created_at
    FROM pgrelay_notifier.start_sending_many(ARRAY[p_notification_id], ARRAY[p_channel], ARRAY[p_event]) s
$$;


ALTER FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) OWNER TO pgrelay_notifier;

--
-- Name: start_sending_many(bigint[], text[], bigint[]); Type: FUNCTION; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

CREATE FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) RETURNS TABLE(ord integer, verdict text, reason text, notification_id bigint, channel text, from_addr text, to_addrs text[], cc_addrs text[], bcc_addrs text[], subject text, body_text text, body_html text, headers jsonb, status text, attempts integer, created_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_left int[];      -- elements not decided yet
  v_round int[];     -- this round: the first element left of each notification
  v_ords int[];
  v_verdicts text[];
  v_reasons text[];
BEGIN
  IF pg_catalog.cardinality(p_channels) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids)
     OR pg_catalog.cardinality(p_events) IS DISTINCT FROM pg_catalog.cardinality(p_notification_ids) THEN
    RAISE EXCEPTION 'pgrelay_notifier.start_sending_many: % notification ids, % channels and % events: one each per element',
      pg_catalog.cardinality(p_notification_ids), pg_catalog.cardinality(p_channels),
      pg_catalog.cardinality(p_events) USING ERRCODE = 'PR111';
  END IF;
  PERFORM FROM pgrelay_notifier.notifications n
    WHERE n.notification_id = ANY (p_notification_ids)
    ORDER BY n.notification_id
      FOR UPDATE;
  v_left := ARRAY(SELECT g FROM pg_catalog.generate_subscripts(p_notification_ids, 1) g ORDER BY g);
  WHILE pg_catalog.cardinality(v_left) > 0 LOOP
    SELECT COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn = 1), '{}'),
           COALESCE(pg_catalog.array_agg(s.o ORDER BY s.o) FILTER (WHERE s.rn > 1), '{}')
      INTO v_round, v_left
      FROM (SELECT l.o, pg_catalog.row_number() OVER (PARTITION BY p_notification_ids[l.o] ORDER BY l.o) AS rn
              FROM unnest(v_left) AS l(o)) s;
    -- The rule, for each element of the round, from the row as it stands.
    SELECT pg_catalog.array_agg(x.o ORDER BY x.o), pg_catalog.array_agg(x.v ORDER BY x.o),
           pg_catalog.array_agg(x.r ORDER BY x.o)
      INTO v_ords, v_verdicts, v_reasons
      FROM (
        SELECT e.o,
               CASE WHEN n.notification_id IS NULL THEN 'missing'
                    WHEN n.channel IS DISTINCT FROM e.ch THEN 'refused'
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN 'in_doubt'
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN 'send'
                    WHEN n.status = 'cancelled' THEN 'cancelled'
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN 'sent'
                    ELSE 'refused' END AS v,
               CASE WHEN n.notification_id IS NULL THEN
                      pg_catalog.format('notification %s does not exist on node %s (not replicated to this node yet, or deleted)',
                                        e.id, pgrelay._this_node())
                    WHEN n.channel IS DISTINCT FROM e.ch THEN
                      pg_catalog.format('notification %s was created for channel %s, not %s: an event only sends its own channel''s notifications',
                                        e.id, pg_catalog.quote_literal(n.channel), COALESCE(pg_catalog.quote_literal(e.ch), 'NULL'))
                    WHEN n.status = 'sending' AND n.sending_event = e.ev AND n.send_in_doubt THEN
                      pg_catalog.format('an earlier attempt of event %s may have handed notification %s to the SMTP server '
                                        '(it stopped, or lost the database, before the outcome was recorded): not sent again, '
                                        'so that it is never delivered twice; it may have been delivered', e.ev, e.id)
                    WHEN n.status = 'queued'
                         OR (n.status = 'sending' AND (n.sending_event = e.ev OR n.sending_event IS NULL)) THEN NULL
                    WHEN n.status = 'cancelled' THEN pg_catalog.format('notification %s was cancelled', e.id)
                    WHEN n.status = 'sent' AND n.sending_event = e.ev THEN
                      pg_catalog.format('notification %s was already sent by this event', e.id)
                    WHEN n.status = 'sending' THEN
                      pg_catalog.format('notification %s is already being sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    WHEN n.status = 'sent' THEN
                      pg_catalog.format('notification %s was already sent%s; one send() is delivered at most once',
                                        e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END)
                    ELSE pg_catalog.format('notification %s already failed%s: %s', e.id, CASE WHEN n.sending_event IS NULL THEN '' ELSE pg_catalog.format(' by event %s', n.sending_event) END,
                                           COALESCE(n.last_error, 'no reason recorded')) END AS r
          FROM (SELECT r.o, p_notification_ids[r.o] AS id, p_channels[r.o] AS ch, p_events[r.o] AS ev
                  FROM unnest(v_round) AS r(o)) e
          LEFT JOIN pgrelay_notifier.notifications n ON n.notification_id = e.id
      ) x;
    -- In doubt from here until the handler records the outcome: sent, or
    -- certainly not handed over (not_sent).
    UPDATE pgrelay_notifier.notifications n SET sending_event = p_events[s.o], send_in_doubt = true
      FROM unnest(v_ords, v_verdicts) AS s(o, v)
     WHERE s.v = 'send' AND n.notification_id = p_notification_ids[s.o];
    PERFORM pgrelay_notifier.set_status_many(
      ARRAY(SELECT p_notification_ids[s.o] FROM unnest(v_ords, v_verdicts) AS s(o, v) WHERE s.v = 'send'),
      'sending');
    RETURN QUERY
      SELECT s.o, s.v, s.r, f.*
        FROM unnest(v_ords, v_verdicts, v_reasons) AS s(o, v, r)
        LEFT JOIN LATERAL pgrelay_notifier.fetch(CASE WHEN s.v = 'send' THEN p_notification_ids[s.o] END) f ON true
       ORDER BY s.o;
  END LOOP;
END
$$;


ALTER FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) OWNER TO pgrelay_notifier;

--
-- Name: _id_seq; Type: SEQUENCE; Schema: pgrelay; Owner: postgres
--

CREATE SEQUENCE pgrelay._id_seq
    START WITH 0
    INCREMENT BY 1
    MINVALUE 0
    NO MAXVALUE
    CACHE 1;


ALTER TABLE pgrelay._id_seq OWNER TO postgres;

--
-- Name: cancels; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.cancels (
    origin_id bigint NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    node integer DEFAULT pgrelay._this_node() NOT NULL
);


ALTER TABLE pgrelay.cancels OWNER TO postgres;

--
-- Name: TABLE cancels; Type: COMMENT; Schema: pgrelay; Owner: postgres
--

COMMENT ON TABLE pgrelay.cancels IS 'Cancel requests (pgrelay.cancel): applied by the node that runs the event; a running attempt that fails ends cancelled.';


--
-- Name: channel_locks; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.channel_locks (
    channel text NOT NULL,
    slot integer NOT NULL,
    changes bigint DEFAULT 0 NOT NULL,
    CONSTRAINT channel_locks_slot CHECK (((slot >= 0) AND (slot <= 63)))
);


ALTER TABLE pgrelay.channel_locks OWNER TO postgres;

--
-- Name: dedup_locks; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.dedup_locks (
    slot integer NOT NULL,
    CONSTRAINT dedup_locks_slot CHECK (((slot >= 0) AND (slot <= 4095)))
);


ALTER TABLE pgrelay.dedup_locks OWNER TO postgres;

--
-- Name: event_payloads; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.event_payloads (
    queue_id bigint NOT NULL,
    payload text NOT NULL
);


ALTER TABLE pgrelay.event_payloads OWNER TO postgres;

--
-- Name: event_traces; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.event_traces (
    origin_id bigint NOT NULL,
    traceparent text NOT NULL,
    CONSTRAINT event_traces_traceparent CHECK ((traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text))
);


ALTER TABLE pgrelay.event_traces OWNER TO postgres;

--
-- Name: flow_locks; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE UNLOGGED TABLE pgrelay.flow_locks (
    channel text NOT NULL
);


ALTER TABLE pgrelay.flow_locks OWNER TO postgres;

--
-- Name: go_handlers; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.go_handlers (
    processor_id bigint NOT NULL,
    handler text NOT NULL
);


ALTER TABLE pgrelay.go_handlers OWNER TO postgres;

--
-- Name: leader_leases; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.leader_leases (
    node_id integer NOT NULL,
    term bigint NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    taken_at timestamp with time zone NOT NULL,
    CONSTRAINT leader_leases_node_id_check CHECK (((node_id >= 0) AND (node_id <= 1023)))
);


ALTER TABLE pgrelay.leader_leases OWNER TO postgres;

--
-- Name: log; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.log (
    id bigint DEFAULT pgrelay._next_id() NOT NULL,
    queue_id bigint NOT NULL,
    origin_id bigint NOT NULL,
    channel text NOT NULL,
    attempt integer NOT NULL,
    event text NOT NULL,
    error text,
    node integer DEFAULT pgrelay._this_node() NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    priority smallint,
    CONSTRAINT log_event CHECK ((event = ANY (ARRAY['succeeded'::text, 'failed'::text, 'gave_up'::text, 'expired'::text, 'deduplicated'::text, 'adopted'::text, 'rescued'::text, 'retried'::text, 'discarded'::text, 'enqueued'::text, 'cancelled'::text, 'snoozed'::text])))
);


ALTER TABLE pgrelay.log OWNER TO postgres;

--
-- Name: log_dropped; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.log_dropped (
    id bigint DEFAULT pgrelay._next_id() NOT NULL,
    node integer NOT NULL,
    rows bigint NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    first_at timestamp with time zone NOT NULL,
    last_at timestamp with time zone NOT NULL,
    dropped_at timestamp with time zone DEFAULT now() NOT NULL,
    dropped_by integer DEFAULT pgrelay._this_node() NOT NULL
);


ALTER TABLE pgrelay.log_dropped OWNER TO postgres;

--
-- Name: processors; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.processors (
    processor_id bigint NOT NULL,
    node_id integer NOT NULL,
    mode text NOT NULL,
    hostname text,
    pid integer,
    version text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE pgrelay.processors OWNER TO postgres;

--
-- Name: publish_cursors; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.publish_cursors (
    node_id integer NOT NULL,
    source text NOT NULL,
    last_id bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT publish_cursors_node CHECK (((node_id >= 0) AND (node_id <= 1023))),
    CONSTRAINT publish_cursors_source CHECK ((source = ANY (ARRAY['log'::text, 'notifier'::text])))
);


ALTER TABLE pgrelay.publish_cursors OWNER TO postgres;

--
-- Name: publish_leases; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.publish_leases (
    node_id integer NOT NULL,
    holder_pid integer NOT NULL,
    holder_start timestamp with time zone NOT NULL,
    taken_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT publish_leases_node CHECK (((node_id >= 0) AND (node_id <= 1023)))
);


ALTER TABLE pgrelay.publish_leases OWNER TO postgres;

--
-- Name: schedule_defs; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.schedule_defs (
    name text NOT NULL,
    channel text NOT NULL,
    payload text NOT NULL,
    every interval,
    cron text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    owner_node integer DEFAULT pgrelay._this_node() NOT NULL,
    anchor timestamp with time zone DEFAULT now() NOT NULL,
    next_fire timestamp with time zone,
    last_due timestamp with time zone,
    last_fire timestamp with time zone,
    last_event bigint,
    last_error text,
    fires bigint DEFAULT 0 NOT NULL,
    created_by name DEFAULT SESSION_USER NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schedule_defs_one_timing CHECK (((every IS NULL) <> (cron IS NULL)))
);


ALTER TABLE pgrelay.schedule_defs OWNER TO postgres;

--
-- Name: schedules; Type: VIEW; Schema: pgrelay; Owner: postgres
--

CREATE VIEW pgrelay.schedules AS
 SELECT s.name,
    s.channel,
    s.payload,
    s.every,
    s.cron,
    s.timezone,
    s.anchor,
    s.owner_node AS node,
    s.next_fire,
    s.last_due,
    s.last_fire,
    s.last_event,
    s.fires,
    s.last_error,
    s.created_by,
    s.created_at,
    s.updated_at
   FROM pgrelay.schedule_defs s;


ALTER TABLE pgrelay.schedules OWNER TO postgres;

--
-- Name: schema_functions; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.schema_functions (
    checksum text NOT NULL,
    release text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE pgrelay.schema_functions OWNER TO postgres;

--
-- Name: schema_migrations; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE pgrelay.schema_migrations OWNER TO postgres;

--
-- Name: sync_answers; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.sync_answers (
    node_id integer NOT NULL,
    peer integer NOT NULL,
    term bigint NOT NULL,
    knows integer[] NOT NULL,
    answered_at timestamp with time zone DEFAULT now() NOT NULL,
    horizon bigint
);


ALTER TABLE pgrelay.sync_answers OWNER TO postgres;

--
-- Name: sync_asks; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.sync_asks (
    node_id integer NOT NULL,
    term bigint NOT NULL,
    asked_at timestamp with time zone DEFAULT now() NOT NULL
);


ALTER TABLE pgrelay.sync_asks OWNER TO postgres;

--
-- Name: this_node; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.this_node (
    singleton boolean DEFAULT true NOT NULL,
    node_id integer NOT NULL,
    wake_key text DEFAULT md5((gen_random_uuid())::text) NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT this_node_node CHECK (((node_id >= 0) AND (node_id <= 1023))),
    CONSTRAINT this_node_singleton CHECK (singleton)
);


ALTER TABLE pgrelay.this_node OWNER TO postgres;

--
-- Name: unique_keys; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE TABLE pgrelay.unique_keys (
    origin_id bigint NOT NULL,
    channel text NOT NULL,
    key_hash bigint NOT NULL,
    key text NOT NULL,
    until timestamp with time zone NOT NULL,
    node integer NOT NULL,
    check_at timestamp with time zone NOT NULL,
    at timestamp with time zone NOT NULL,
    held boolean DEFAULT false NOT NULL,
    due timestamp with time zone
);


ALTER TABLE pgrelay.unique_keys OWNER TO postgres;

--
-- Name: wake_slots; Type: TABLE; Schema: pgrelay; Owner: postgres
--

CREATE UNLOGGED TABLE pgrelay.wake_slots (
    slot integer NOT NULL,
    armed boolean NOT NULL,
    CONSTRAINT wake_slots_slot CHECK (((slot >= 0) AND (slot <= 1023)))
);


ALTER TABLE pgrelay.wake_slots OWNER TO postgres;

--
-- Name: debug_log; Type: TABLE; Schema: pgrelay_notifier; Owner: postgres
--

CREATE TABLE pgrelay_notifier.debug_log (
    id bigint DEFAULT pgrelay._next_id() NOT NULL,
    notification_id bigint NOT NULL,
    message text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE pgrelay_notifier.debug_log OWNER TO postgres;

--
-- Name: notifications; Type: TABLE; Schema: pgrelay_notifier; Owner: postgres
--

CREATE TABLE pgrelay_notifier.notifications (
    notification_id bigint DEFAULT pgrelay._next_id() NOT NULL,
    channel text NOT NULL,
    from_addr text NOT NULL,
    to_addrs text[] NOT NULL,
    cc_addrs text[] DEFAULT '{}'::text[] NOT NULL,
    bcc_addrs text[] DEFAULT '{}'::text[] NOT NULL,
    subject text NOT NULL,
    body_text text NOT NULL,
    body_html text,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    sending_event bigint,
    send_in_doubt boolean DEFAULT false NOT NULL,
    sent_by text,
    CONSTRAINT notifications_status CHECK ((status = ANY (ARRAY['queued'::text, 'sending'::text, 'sent'::text, 'failed'::text, 'cancelled'::text])))
);


ALTER TABLE pgrelay_notifier.notifications OWNER TO postgres;

--
-- Name: COLUMN notifications.sending_event; Type: COMMENT; Schema: pgrelay_notifier; Owner: postgres
--

COMMENT ON COLUMN pgrelay_notifier.notifications.sending_event IS 'origin_id of the queue event that moved the notification from queued to sending: only its attempts send it';


--
-- Name: COLUMN notifications.send_in_doubt; Type: COMMENT; Schema: pgrelay_notifier; Owner: postgres
--

COMMENT ON COLUMN pgrelay_notifier.notifications.send_in_doubt IS 'true from the moment an attempt may hand the message to the SMTP server until its outcome is recorded';


--
-- Name: COLUMN notifications.sent_by; Type: COMMENT; Schema: pgrelay_notifier; Owner: postgres
--

COMMENT ON COLUMN pgrelay_notifier.notifications.sent_by IS 'the role that called send(): SET ROLE''s role, else the login; only it, its members and admins see and cancel the notification (NULL: admins only)';


--
-- Name: status_events; Type: TABLE; Schema: pgrelay_notifier; Owner: postgres
--

CREATE TABLE pgrelay_notifier.status_events (
    id bigint DEFAULT pgrelay._next_id() NOT NULL,
    notification_id bigint NOT NULL,
    channel text NOT NULL,
    status text NOT NULL,
    error text,
    node integer DEFAULT pgrelay._this_node() NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE pgrelay_notifier.status_events OWNER TO postgres;

--
-- Name: cancels cancels_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.cancels
    ADD CONSTRAINT cancels_pkey PRIMARY KEY (origin_id);


--
-- Name: channel_locks channel_locks_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.channel_locks
    ADD CONSTRAINT channel_locks_pkey PRIMARY KEY (channel, slot);


--
-- Name: channels channels_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.channels
    ADD CONSTRAINT channels_pkey PRIMARY KEY (channel);


--
-- Name: dead_letters dead_letters_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (id);


--
-- Name: dedup_locks dedup_locks_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.dedup_locks
    ADD CONSTRAINT dedup_locks_pkey PRIMARY KEY (slot);


--
-- Name: event_payloads event_payloads_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.event_payloads
    ADD CONSTRAINT event_payloads_pkey PRIMARY KEY (queue_id);


--
-- Name: event_traces event_traces_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.event_traces
    ADD CONSTRAINT event_traces_pkey PRIMARY KEY (origin_id);


--
-- Name: flow_locks flow_locks_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.flow_locks
    ADD CONSTRAINT flow_locks_pkey PRIMARY KEY (channel);


--
-- Name: go_handlers go_handlers_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.go_handlers
    ADD CONSTRAINT go_handlers_pkey PRIMARY KEY (processor_id, handler);


--
-- Name: leader_leases leader_leases_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.leader_leases
    ADD CONSTRAINT leader_leases_pkey PRIMARY KEY (node_id);


--
-- Name: log_dropped log_dropped_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.log_dropped
    ADD CONSTRAINT log_dropped_pkey PRIMARY KEY (id);


--
-- Name: log log_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.log
    ADD CONSTRAINT log_pkey PRIMARY KEY (id);


--
-- Name: nodes nodes_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (node_id);


--
-- Name: processors processors_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.processors
    ADD CONSTRAINT processors_pkey PRIMARY KEY (processor_id);


--
-- Name: publish_cursors publish_cursors_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.publish_cursors
    ADD CONSTRAINT publish_cursors_pkey PRIMARY KEY (node_id, source);


--
-- Name: publish_leases publish_leases_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.publish_leases
    ADD CONSTRAINT publish_leases_pkey PRIMARY KEY (node_id);


--
-- Name: queue queue_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.queue
    ADD CONSTRAINT queue_pkey PRIMARY KEY (id);


--
-- Name: schedule_defs schedule_defs_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.schedule_defs
    ADD CONSTRAINT schedule_defs_pkey PRIMARY KEY (name);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: settings settings_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (singleton);


--
-- Name: sync_answers sync_answers_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.sync_answers
    ADD CONSTRAINT sync_answers_pkey PRIMARY KEY (node_id, peer);


--
-- Name: sync_asks sync_asks_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.sync_asks
    ADD CONSTRAINT sync_asks_pkey PRIMARY KEY (node_id);


--
-- Name: this_node this_node_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.this_node
    ADD CONSTRAINT this_node_pkey PRIMARY KEY (singleton);


--
-- Name: unique_keys unique_keys_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.unique_keys
    ADD CONSTRAINT unique_keys_pkey PRIMARY KEY (origin_id);


--
-- Name: wake_slots wake_slots_pkey; Type: CONSTRAINT; Schema: pgrelay; Owner: postgres
--

ALTER TABLE ONLY pgrelay.wake_slots
    ADD CONSTRAINT wake_slots_pkey PRIMARY KEY (slot);


--
-- Name: debug_log debug_log_pkey; Type: CONSTRAINT; Schema: pgrelay_notifier; Owner: postgres
--

ALTER TABLE ONLY pgrelay_notifier.debug_log
    ADD CONSTRAINT debug_log_pkey PRIMARY KEY (id);


--
-- Name: notifications notifications_pkey; Type: CONSTRAINT; Schema: pgrelay_notifier; Owner: postgres
--

ALTER TABLE ONLY pgrelay_notifier.notifications
    ADD CONSTRAINT notifications_pkey PRIMARY KEY (notification_id);


--
-- Name: status_events status_events_pkey; Type: CONSTRAINT; Schema: pgrelay_notifier; Owner: postgres
--

ALTER TABLE ONLY pgrelay_notifier.status_events
    ADD CONSTRAINT status_events_pkey PRIMARY KEY (id);


--
-- Name: dead_letters_channel_ended; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX dead_letters_channel_ended ON pgrelay.dead_letters USING btree (channel, ended_at);


--
-- Name: dead_letters_ended; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX dead_letters_ended ON pgrelay.dead_letters USING btree (ended_at);


--
-- Name: dead_letters_origin; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX dead_letters_origin ON pgrelay.dead_letters USING btree (origin_id, id);


--
-- Name: flow_starts_channel; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX flow_starts_channel ON pgrelay.flow_starts USING btree (channel, started_at);


--
-- Name: log_node_id; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX log_node_id ON pgrelay.log USING btree (node, id);


--
-- Name: log_origin; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX log_origin ON pgrelay.log USING btree (origin_id);


--
-- Name: queue_dedup; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_dedup ON pgrelay.queue USING btree (channel, phash) WHERE ((dispatched_at IS NULL) AND (phash IS NOT NULL));


--
-- Name: queue_inflight; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_inflight ON pgrelay.queue USING btree (dispatched_by, channel) WHERE (dispatched_at IS NOT NULL);


--
-- Name: queue_inflight_lane; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_inflight_lane ON pgrelay.queue USING btree (channel, lane) WHERE ((dispatched_at IS NOT NULL) AND (lane IS NOT NULL));


--
-- Name: queue_lane; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_lane ON pgrelay.queue USING btree (channel, lane, origin_id, id) WHERE ((dispatched_at IS NULL) AND (lane IS NOT NULL));


--
-- Name: queue_priority; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_priority ON pgrelay.queue USING btree (channel, priority DESC, not_before, id) WHERE ((dispatched_at IS NULL) AND (priority <> 0));


--
-- Name: queue_ready; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_ready ON pgrelay.queue USING btree (channel, not_before, id) WHERE (dispatched_at IS NULL);


--
-- Name: queue_retry_origin; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX queue_retry_origin ON pgrelay.queue USING btree (origin_id) WHERE (retry_of IS NOT NULL);


--
-- Name: schedule_defs_owner_next; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX schedule_defs_owner_next ON pgrelay.schedule_defs USING btree (owner_node, next_fire);


--
-- Name: unique_keys_check; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX unique_keys_check ON pgrelay.unique_keys USING btree (node, check_at);


--
-- Name: unique_keys_held; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX unique_keys_held ON pgrelay.unique_keys USING btree (origin_id) WHERE held;


--
-- Name: unique_keys_key; Type: INDEX; Schema: pgrelay; Owner: postgres
--

CREATE INDEX unique_keys_key ON pgrelay.unique_keys USING btree (channel, key_hash);


--
-- Name: debug_log_notification; Type: INDEX; Schema: pgrelay_notifier; Owner: postgres
--

CREATE INDEX debug_log_notification ON pgrelay_notifier.debug_log USING btree (notification_id, id);


--
-- Name: status_events_node_id; Type: INDEX; Schema: pgrelay_notifier; Owner: postgres
--

CREATE INDEX status_events_node_id ON pgrelay_notifier.status_events USING btree (node, id);


--
-- Name: status_events_notification; Type: INDEX; Schema: pgrelay_notifier; Owner: postgres
--

CREATE INDEX status_events_notification ON pgrelay_notifier.status_events USING btree (notification_id, id);


--
-- Name: channels channels_locks; Type: TRIGGER; Schema: pgrelay; Owner: postgres
--

CREATE TRIGGER channels_locks AFTER INSERT ON pgrelay.channels FOR EACH ROW EXECUTE FUNCTION pgrelay._channel_locks_create();

ALTER TABLE pgrelay.channels ENABLE ALWAYS TRIGGER channels_locks;


--
-- Name: log log_release_key; Type: TRIGGER; Schema: pgrelay; Owner: postgres
--

CREATE TRIGGER log_release_key AFTER INSERT ON pgrelay.log FOR EACH ROW WHEN ((new.event = ANY (ARRAY['gave_up'::text, 'expired'::text, 'cancelled'::text]))) EXECUTE FUNCTION pgrelay._log_release_key();


--
-- Name: queue queue_after_insert; Type: TRIGGER; Schema: pgrelay; Owner: postgres
--

CREATE TRIGGER queue_after_insert AFTER INSERT ON pgrelay.queue REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((current_setting('pgrelay.stamped'::text, true) IS DISTINCT FROM 'on'::text)) EXECUTE FUNCTION pgrelay._queue_after_insert();


--
-- Name: queue queue_before_insert; Type: TRIGGER; Schema: pgrelay; Owner: postgres
--

CREATE TRIGGER queue_before_insert BEFORE INSERT ON pgrelay.queue FOR EACH ROW WHEN ((current_setting('pgrelay.stamped'::text, true) IS DISTINCT FROM 'on'::text)) EXECUTE FUNCTION pgrelay._queue_before_insert();

ALTER TABLE pgrelay.queue ENABLE ALWAYS TRIGGER queue_before_insert;


--
-- Name: queue queue_wake_replica; Type: TRIGGER; Schema: pgrelay; Owner: postgres
--

CREATE TRIGGER queue_wake_replica AFTER INSERT OR UPDATE ON pgrelay.queue FOR EACH ROW WHEN ((new.dispatched_at IS NULL)) EXECUTE FUNCTION pgrelay._queue_wake_replica();

ALTER TABLE pgrelay.queue ENABLE REPLICA TRIGGER queue_wake_replica;


--
-- Name: SCHEMA pgrelay; Type: ACL; Schema: -; Owner: postgres
--

GRANT USAGE ON SCHEMA pgrelay TO pgrelay_producer;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_processor;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_admin;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_notifier;
GRANT USAGE ON SCHEMA pgrelay TO pgrelay_viewer;


--
-- Name: SCHEMA pgrelay_notifier; Type: ACL; Schema: -; Owner: postgres
--

GRANT USAGE ON SCHEMA pgrelay_notifier TO pgrelay_notifier;
GRANT USAGE ON SCHEMA pgrelay_notifier TO pgrelay_producer;
GRANT USAGE ON SCHEMA pgrelay_notifier TO pgrelay_processor;
GRANT USAGE ON SCHEMA pgrelay_notifier TO pgrelay_admin;
GRANT USAGE ON SCHEMA pgrelay_notifier TO pgrelay_viewer;


--
-- Name: FUNCTION _adopt(p_dead_after interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._adopt(p_dead_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._adopt(p_dead_after interval) TO pgrelay_processor;


--
-- Name: FUNCTION _adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._adopt_rows(p_dead integer, p_adopter integer, p_procs bigint[], p_why text) TO pgrelay_processor;


--
-- Name: FUNCTION _adopters(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._adopters() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._adopters() TO pgrelay_processor;


--
-- Name: FUNCTION _arm_wakes(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._arm_wakes() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._arm_wakes() TO pgrelay_processor;


--
-- Name: FUNCTION _backoff(p_retry_delay interval, p_attempt integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._backoff(p_retry_delay interval, p_attempt integer) TO pgrelay_processor;


--
-- Name: FUNCTION _batch_fence(p_mode text, p_term bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._batch_fence(p_mode text, p_term bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _cancel_apply(p_origin bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cancel_apply(p_origin bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._cancel_apply(p_origin bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _cancel_email_event(p_notification_id bigint, p_channel text, p_by text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._cancel_email_event(p_notification_id bigint, p_channel text, p_by text) TO pgrelay_notifier;


--
-- Name: FUNCTION _cancel_request(p_origin bigint, p_by text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cancel_request(p_origin bigint, p_by text) FROM PUBLIC;


--
-- Name: FUNCTION _cancel_sweep(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cancel_sweep() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._cancel_sweep() TO pgrelay_processor;


--
-- Name: FUNCTION _cancels_here(p_run_in_node integer, p_owner_node integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._cancels_here(p_run_in_node integer, p_owner_node integer) TO pgrelay_processor;


--
-- Name: FUNCTION _channel_locks_create(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._channel_locks_create() FROM PUBLIC;


--
-- Name: TABLE channels; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.channels TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.channels TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.channels TO pgrelay_viewer;


--
-- Name: COLUMN channels.channel; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT(channel) ON TABLE pgrelay.channels TO pgrelay_notifier;


--
-- Name: COLUMN channels.handler; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT(handler) ON TABLE pgrelay.channels TO pgrelay_notifier;


--
-- Name: COLUMN channels.kind; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT(kind) ON TABLE pgrelay.channels TO pgrelay_notifier;


--
-- Name: FUNCTION _check_channel(c pgrelay.channels, p_check_handler boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._check_channel(c pgrelay.channels, p_check_handler boolean) FROM PUBLIC;


--
-- Name: FUNCTION _check_flow(p_channel text, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._check_flow(p_channel text, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval) FROM PUBLIC;


--
-- Name: FUNCTION _check_notify(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._check_notify(p_channel text) FROM PUBLIC;


--
-- Name: FUNCTION _check_payload(p_channel text, p_payload text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._check_payload(p_channel text, p_payload text) FROM PUBLIC;


--
-- Name: FUNCTION _claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_allowance(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_want integer) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_channel(p_processor bigint, p_mode text, p_leader boolean, p_limit integer, p_channel text, p_kinds text[], p_term bigint, p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_direct(p_channel text, p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_kinds text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_kind(p_kind text, p_handler text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._claim_kind(p_kind text, p_handler text) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_lanes_direct(p_mode text, p_leader boolean, p_term bigint, p_limit integer, p_after_channel text, p_after_lane bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_none(p_processor bigint, ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean, p_limit integer) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_pick(p_channel text, p_node integer, p_all boolean, p_own boolean, p_limit integer) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_prioritised(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_prioritised(p_channel text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_prioritised(p_channel text) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_rate_rows(p_channels text[], p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_rate_wait(ch pgrelay.channels, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_scope(p_mode text, p_leader boolean, p_term bigint, OUT all_rows boolean, OUT own_rows boolean) TO pgrelay_processor;


--
-- Name: TABLE flow_starts; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.flow_starts TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.flow_starts TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.flow_starts TO pgrelay_viewer;


--
-- Name: FUNCTION _claim_started(p_channel text, p_n integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_started(p_channel text, p_n integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_started(p_channel text, p_n integer) TO pgrelay_processor;


--
-- Name: FUNCTION _claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._claim_visits(c pgrelay.channels, p_kinds text[], p_direct boolean, p_direct_kinds text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._complete(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._complete_outcomes(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_events text[], p_errors text[], OUT done integer, OUT gave_up bigint[]) TO pgrelay_processor;


--
-- Name: FUNCTION _cron_error(p_cron text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cron_error(p_cron text) FROM PUBLIC;


--
-- Name: FUNCTION _cron_value(p_token text, p_field integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._cron_value(p_token text, p_field integer) FROM PUBLIC;


--
-- Name: FUNCTION _default_cluster_name(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._default_cluster_name() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay._default_cluster_name() TO pgrelay_admin;


--
-- Name: TABLE dead_letters; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.dead_letters TO pgrelay_admin;
GRANT SELECT,INSERT ON TABLE pgrelay.dead_letters TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.dead_letters TO pgrelay_viewer;


--
-- Name: FUNCTION _discarded(dl pgrelay.dead_letters); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._discarded(dl pgrelay.dead_letters) FROM PUBLIC;


--
-- Name: FUNCTION _due(p_not_before timestamp with time zone, p_delay interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._due(p_not_before timestamp with time zone, p_delay interval) FROM PUBLIC;


--
-- Name: FUNCTION _enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._enqueue(ch pgrelay.channels, p_ids bigint[], p_payloads text[], p_due timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION _enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._enqueue_dedup(ch pgrelay.channels, p_payload text, p_due timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION _enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamp with time zone, p_unique_for interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._enqueue_unique(ch pgrelay.channels, p_key text, p_payload text, p_due timestamp with time zone, p_unique_for interval) FROM PUBLIC;


--
-- Name: FUNCTION _next_id_at(p_ms bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._next_id_at(p_ms bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._next_id_at(p_ms bigint) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._next_id_at(p_ms bigint) TO pgrelay_notifier;


--
-- Name: FUNCTION _next_id(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._next_id() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._next_id() TO pgrelay_notifier;


--
-- Name: FUNCTION _this_node(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._this_node() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._this_node() TO pgrelay_notifier;


--
-- Name: TABLE queue; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.queue TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.queue TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.queue TO pgrelay_viewer;


--
-- Name: FUNCTION _event_open(p_origin_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._event_open(p_origin_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._event_open(p_origin_id bigint) TO pgrelay_processor;


--
-- Name: TABLE settings; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.settings TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.settings TO pgrelay_viewer;
GRANT SELECT ON TABLE pgrelay.settings TO pgrelay_admin;


--
-- Name: COLUMN settings.event_schema; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT INSERT(event_schema),UPDATE(event_schema) ON TABLE pgrelay.settings TO pgrelay_admin;


--
-- Name: COLUMN settings.cluster_name; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT INSERT(cluster_name),UPDATE(cluster_name) ON TABLE pgrelay.settings TO pgrelay_admin;


--
-- Name: COLUMN settings.updated_at; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT UPDATE(updated_at) ON TABLE pgrelay.settings TO pgrelay_admin;


--
-- Name: FUNCTION _event_settings(OUT event_schema integer, OUT cluster_name text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay._event_settings(OUT event_schema integer, OUT cluster_name text) TO pgrelay_admin;


--
-- Name: FUNCTION _every_next(p_anchor timestamp with time zone, p_every interval, p_timezone text, p_after timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._every_next(p_anchor timestamp with time zone, p_every interval, p_timezone text, p_after timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION _expiry_of(p_expire_after interval, p_enqueued_at timestamp with time zone, p_not_before timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._expiry_of(p_expire_after interval, p_enqueued_at timestamp with time zone, p_not_before timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION _go_handlers_set(p_processor bigint, p_handlers text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._go_handlers_set(p_processor bigint, p_handlers text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._heartbeat(p_processor bigint, p_mode text, p_hostname text, p_pid integer, p_version text) TO pgrelay_processor;


--
-- Name: FUNCTION _holds_lease(p_term bigint, p_at timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._holds_lease(p_term bigint, p_at timestamp with time zone) TO pgrelay_processor;


--
-- Name: FUNCTION _id_floor(p_at timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._id_floor(p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._id_floor(p_at timestamp with time zone) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._id_floor(p_at timestamp with time zone) TO pgrelay_viewer;


--
-- Name: FUNCTION _id_node(p_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._id_node(p_id bigint) FROM PUBLIC;


--
-- Name: FUNCTION _may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._may_take(p_run_in_node integer, p_owner_node integer, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;


--
-- Name: FUNCTION _lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._lane_head(p_channel text, p_lane bigint, p_node integer, p_all boolean, p_own boolean) TO pgrelay_processor;


--
-- Name: FUNCTION _lane_of(p_concurrency_mode text, p_payload text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lane_of(p_concurrency_mode text, p_payload text) FROM PUBLIC;


--
-- Name: FUNCTION _lease(p_duration interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lease(p_duration interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._lease(p_duration interval) TO pgrelay_processor;


--
-- Name: FUNCTION _lease_holder(p_at timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._lease_holder(p_at timestamp with time zone) TO pgrelay_viewer;


--
-- Name: FUNCTION _lease_release(p_term bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lease_release(p_term bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._lease_release(p_term bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _lock_channel(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lock_channel(p_channel text) FROM PUBLIC;


--
-- Name: FUNCTION _lock_channel_exclusive(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._lock_channel_exclusive(p_channel text) FROM PUBLIC;


--
-- Name: FUNCTION _log_release_key(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._log_release_key() FROM PUBLIC;


--
-- Name: FUNCTION _max_snoozes(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._max_snoozes() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._max_snoozes() TO pgrelay_processor;


--
-- Name: TABLE nodes; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.nodes TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.nodes TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.nodes TO pgrelay_viewer;


--
-- Name: FUNCTION _may_adopt(n pgrelay.nodes); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._may_adopt(n pgrelay.nodes) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._may_adopt(n pgrelay.nodes) TO pgrelay_processor;


--
-- Name: FUNCTION _next_ids(p_n integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._next_ids(p_n integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._next_ids(p_n integer) TO pgrelay_processor;


--
-- Name: FUNCTION _node_setting(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._node_setting() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay._node_setting() TO pgrelay_notifier;


--
-- Name: FUNCTION _notification_of(p_kind text, p_payload text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._notification_of(p_kind text, p_payload text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._notification_of(p_kind text, p_payload text) TO pgrelay_processor;


--
-- Name: FUNCTION _notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._notifier_status_batch(p_node integer, p_after bigint, p_before bigint, p_limit integer) TO pgrelay_processor;


--
-- Name: FUNCTION _payload_ok(p_payload text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._payload_ok(p_payload text) FROM PUBLIC;


--
-- Name: FUNCTION _pending_channels(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._pending_channels() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._pending_channels() TO pgrelay_processor;


--
-- Name: FUNCTION _phash_of(p_deduplicate boolean, p_payload text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._phash_of(p_deduplicate boolean, p_payload text) FROM PUBLIC;


--
-- Name: FUNCTION _pin_of(p_node_restricted boolean, p_node integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._pin_of(p_node_restricted boolean, p_node integer) FROM PUBLIC;


--
-- Name: FUNCTION _priority_of(p_priority integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._priority_of(p_priority integer) FROM PUBLIC;


--
-- Name: FUNCTION _processor_start(p_mode text, p_hostname text, p_pid integer, p_version text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._processor_start(p_mode text, p_hostname text, p_pid integer, p_version text) TO pgrelay_processor;


--
-- Name: FUNCTION _processor_stop(p_processor bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._processor_stop(p_processor bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._processor_stop(p_processor bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _publish_horizon(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._publish_horizon() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._publish_horizon() TO pgrelay_processor;


--
-- Name: FUNCTION _queue_after_insert(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._queue_after_insert() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._queue_after_insert() TO pgrelay_processor;


--
-- Name: FUNCTION _queue_before_insert(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._queue_before_insert() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._queue_before_insert() TO pgrelay_processor;


--
-- Name: FUNCTION _queue_wake_replica(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._queue_wake_replica() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._queue_wake_replica() TO pgrelay_processor;


--
-- Name: FUNCTION _ready_direct(p_mode text, p_leader boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean) TO pgrelay_processor;


--
-- Name: FUNCTION _ready_direct(p_mode text, p_leader boolean, p_kinds text[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._ready_direct(p_mode text, p_leader boolean, p_kinds text[]) TO pgrelay_processor;


--
-- Name: FUNCTION _record_node(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._record_node() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._record_node() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._record_node() TO pgrelay_processor;


--
-- Name: FUNCTION _rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval) TO pgrelay_processor;


--
-- Name: FUNCTION _resolve_keys(p_dead_after interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._resolve_keys(p_dead_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._resolve_keys(p_dead_after interval) TO pgrelay_processor;


--
-- Name: FUNCTION _retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._retry_after(p_ids bigint[], p_origin_ids bigint[], p_delays interval[]) TO pgrelay_processor;


--
-- Name: FUNCTION _retry_dead(dl pgrelay.dead_letters); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._retry_dead(dl pgrelay.dead_letters) FROM PUBLIC;


--
-- Name: FUNCTION _schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._schedule_fire(p_name text, p_first timestamp with time zone, p_next timestamp with time zone, p_error text) TO pgrelay_processor;


--
-- Name: FUNCTION _schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._schedules_due(p_mode text, p_leader boolean, p_term bigint, p_limit integer) TO pgrelay_processor;


--
-- Name: FUNCTION _schedules_wake(p_mode text, p_leader boolean, p_term bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._schedules_wake(p_mode text, p_leader boolean, p_term bigint) TO pgrelay_processor;


--
-- Name: FUNCTION _snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._snooze(p_processor bigint, p_ids bigint[], p_claimed_at timestamp with time zone[], p_delays interval[], OUT done integer, OUT gave_up bigint[]) TO pgrelay_processor;


--
-- Name: FUNCTION _store_traces(p_channel text, p_ids bigint[]); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._store_traces(p_channel text, p_ids bigint[]) TO pgrelay_processor;


--
-- Name: FUNCTION _succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._succeed(p_processor bigint, p_id bigint, p_claimed_at timestamp with time zone) TO pgrelay_processor;


--
-- Name: FUNCTION _sync_answer(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._sync_answer() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._sync_answer() TO pgrelay_processor;


--
-- Name: FUNCTION _sync_ask(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._sync_ask() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._sync_ask() TO pgrelay_processor;


--
-- Name: FUNCTION _sync_peers(p_term bigint, p_dead_after interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._sync_peers(p_term bigint, p_dead_after interval) TO pgrelay_processor;


--
-- Name: FUNCTION _take_dead_letter(p_id bigint, p_caller text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._take_dead_letter(p_id bigint, p_caller text) FROM PUBLIC;


--
-- Name: FUNCTION _traced(p_channel text, p_traceparent text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay._traced(p_channel text, p_traceparent text) TO pgrelay_notifier;


--
-- Name: FUNCTION _trim_dead_letters(p_older_than interval, p_batch integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._trim_dead_letters(p_older_than interval, p_batch integer) TO pgrelay_processor;


--
-- Name: FUNCTION _trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._trim_event_payloads(p_older_than interval, p_batch integer, p_unpublished_max interval) TO pgrelay_processor;


--
-- Name: FUNCTION _trim_event_traces(p_older_than interval, p_batch integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._trim_event_traces(p_older_than interval, p_batch integer) TO pgrelay_processor;


--
-- Name: FUNCTION _trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._trim_log(p_older_than interval, p_batch integer, p_unpublished_max interval) TO pgrelay_processor;


--
-- Name: FUNCTION _unique_for(p_unique_for interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._unique_for(p_unique_for interval) FROM PUBLIC;


--
-- Name: FUNCTION _wake(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._wake(p_channel text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._wake(p_channel text) TO pgrelay_processor;


--
-- Name: FUNCTION _wake_hint(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._wake_hint(p_channel text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._wake_hint(p_channel text) TO pgrelay_processor;


--
-- Name: FUNCTION _wake_slot(p_channel text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._wake_slot(p_channel text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._wake_slot(p_channel text) TO pgrelay_processor;


--
-- Name: FUNCTION _wake_xids_ended(p_snapshot pg_snapshot); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay._wake_xids_ended(p_snapshot pg_snapshot) TO pgrelay_processor;


--
-- Name: FUNCTION cancel(p_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.cancel(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.cancel(p_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.cancel(p_id bigint) TO pgrelay_admin;


--
-- Name: FUNCTION decommission(p_node integer, p_dead_after interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.decommission(p_node integer, p_dead_after interval) TO pgrelay_admin;


--
-- Name: FUNCTION discard(p_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.discard(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.discard(p_id bigint) TO pgrelay_admin;


--
-- Name: FUNCTION discard_all(p_channel text, p_since timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.discard_all(p_channel text, p_since timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.discard_all(p_channel text, p_since timestamp with time zone) TO pgrelay_admin;


--
-- Name: FUNCTION nodes_overview(p_dead_after interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.nodes_overview(p_dead_after interval) TO pgrelay_viewer;


--
-- Name: FUNCTION notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.notify(p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval) TO pgrelay_notifier;


--
-- Name: FUNCTION notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.notify_many(p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval) TO pgrelay_admin;


--
-- Name: FUNCTION publish_backlog(p_cap integer); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.publish_backlog(p_cap integer) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.publish_backlog(p_cap integer) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.publish_backlog(p_cap integer) TO pgrelay_processor;


--
-- Name: FUNCTION queue_stats(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.queue_stats() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.queue_stats() TO pgrelay_viewer;


--
-- Name: FUNCTION register(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.register(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;


--
-- Name: FUNCTION retry(p_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.retry(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.retry(p_id bigint) TO pgrelay_admin;


--
-- Name: FUNCTION retry_all(p_channel text, p_since timestamp with time zone); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.retry_all(p_channel text, p_since timestamp with time zone) TO pgrelay_admin;


--
-- Name: FUNCTION schedule(p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.schedule(p_name text, p_channel text, p_payload text, p_every interval, p_cron text, p_timezone text) TO pgrelay_admin;


--
-- Name: FUNCTION status(p_id bigint); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.status(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.status(p_id bigint) TO pgrelay_viewer;


--
-- Name: FUNCTION unhandled_go_channels(); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.unhandled_go_channels() FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_viewer;


--
-- Name: FUNCTION unregister(p_channel text, p_force boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.unregister(p_channel text, p_force boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.unregister(p_channel text, p_force boolean) TO pgrelay_admin;


--
-- Name: FUNCTION unschedule(p_name text); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.unschedule(p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.unschedule(p_name text) TO pgrelay_admin;


--
-- Name: FUNCTION update(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_paused boolean, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean); Type: ACL; Schema: pgrelay; Owner: postgres
--

REVOKE ALL ON FUNCTION pgrelay.update(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_paused boolean, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay.update(p_channel text, p_handler text, p_kind text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_paused boolean, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;


--
-- Name: FUNCTION _caller(); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._caller() FROM PUBLIC;


--
-- Name: FUNCTION _cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) TO pgrelay_processor;
GRANT ALL ON FUNCTION pgrelay_notifier._cancel_for_events(p_notification_ids bigint[], p_channels text[], p_reason text) TO postgres;


--
-- Name: FUNCTION _check_address(p_field text, p_addr text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) TO pgrelay_admin;


--
-- Name: FUNCTION _check_addresses(p_field text, p_addrs text[]); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._check_addresses(p_field text, p_addrs text[]) FROM PUBLIC;


--
-- Name: FUNCTION _check_headers(p_headers jsonb); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._check_headers(p_headers jsonb) FROM PUBLIC;


--
-- Name: FUNCTION _event(p_notification_ids bigint[], p_channels text[], p_status text, p_error text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._event(p_notification_ids bigint[], p_channels text[], p_status text, p_error text) FROM PUBLIC;


--
-- Name: FUNCTION _may_see(p_sent_by text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier._may_see(p_sent_by text) FROM PUBLIC;


--
-- Name: FUNCTION cancel(p_notification_id bigint); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.cancel(p_notification_id bigint) TO pgrelay_admin;


--
-- Name: FUNCTION create_channel(p_channel text, p_from text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.create_channel(p_channel text, p_from text, p_concurrency_mode text, p_deduplicate boolean, p_node_restricted boolean, p_max_attempts integer, p_retry_delay interval, p_expire_after interval, p_timeout interval, p_publish_payload boolean, p_publish_errors text, p_publish_enqueued boolean, p_priority integer, p_max_in_flight integer, p_rate_limit integer, p_rate_period interval, p_store_traces boolean) TO pgrelay_admin;


--
-- Name: FUNCTION debug_log(p_notification_id bigint, p_message text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.debug_log(p_notification_id bigint, p_message text) TO pgrelay_processor;


--
-- Name: FUNCTION fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.fail_for_event(p_notification_id bigint, p_channel text, p_event bigint, p_error text) TO pgrelay_processor;


--
-- Name: FUNCTION "fetch"(p_notification_id bigint); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier."fetch"(p_notification_id bigint) TO pgrelay_processor;


--
-- Name: FUNCTION get_status(p_notification_id bigint); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.get_status(p_notification_id bigint) TO pgrelay_admin;


--
-- Name: FUNCTION not_sent(p_notification_id bigint, p_event bigint); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.not_sent(p_notification_id bigint, p_event bigint) TO pgrelay_processor;


--
-- Name: FUNCTION requeue(p_notification_id bigint, p_channel text, p_reason text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.requeue(p_notification_id bigint, p_channel text, p_reason text) FROM PUBLIC;


--
-- Name: FUNCTION send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) TO pgrelay_producer;
GRANT ALL ON FUNCTION pgrelay_notifier.send(p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb) TO pgrelay_admin;


--
-- Name: FUNCTION set_status(p_notification_id bigint, p_status text, p_error text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.set_status(p_notification_id bigint, p_status text, p_error text) TO pgrelay_processor;


--
-- Name: FUNCTION set_status_many(p_notification_ids bigint[], p_status text, p_error text); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.set_status_many(p_notification_ids bigint[], p_status text, p_error text) TO pgrelay_processor;


--
-- Name: FUNCTION start_sending(p_notification_id bigint, p_channel text, p_event bigint); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.start_sending(p_notification_id bigint, p_channel text, p_event bigint) TO pgrelay_processor;


--
-- Name: FUNCTION start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]); Type: ACL; Schema: pgrelay_notifier; Owner: pgrelay_notifier
--

REVOKE ALL ON FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION pgrelay_notifier.start_sending_many(p_notification_ids bigint[], p_channels text[], p_events bigint[]) TO pgrelay_processor;


--
-- Name: SEQUENCE _id_seq; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT USAGE,UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_processor;
GRANT USAGE,UPDATE ON SEQUENCE pgrelay._id_seq TO pgrelay_notifier;


--
-- Name: TABLE cancels; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,DELETE ON TABLE pgrelay.cancels TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.cancels TO pgrelay_viewer;


--
-- Name: TABLE event_payloads; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.event_payloads TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE ON TABLE pgrelay.event_payloads TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.event_payloads TO pgrelay_viewer;


--
-- Name: TABLE event_traces; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.event_traces TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.event_traces TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.event_traces TO pgrelay_viewer;


--
-- Name: TABLE flow_locks; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.flow_locks TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.flow_locks TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.flow_locks TO pgrelay_viewer;


--
-- Name: TABLE go_handlers; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.go_handlers TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE ON TABLE pgrelay.go_handlers TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.go_handlers TO pgrelay_viewer;


--
-- Name: TABLE leader_leases; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay.leader_leases TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.leader_leases TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.leader_leases TO pgrelay_viewer;


--
-- Name: TABLE log; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.log TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE ON TABLE pgrelay.log TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.log TO pgrelay_viewer;


--
-- Name: TABLE log_dropped; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.log_dropped TO pgrelay_admin;
GRANT SELECT,INSERT ON TABLE pgrelay.log_dropped TO pgrelay_processor;


--
-- Name: TABLE processors; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.processors TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.processors TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.processors TO pgrelay_viewer;


--
-- Name: TABLE publish_cursors; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.publish_cursors TO pgrelay_admin;
GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay.publish_cursors TO pgrelay_processor;


--
-- Name: TABLE publish_leases; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.publish_leases TO pgrelay_admin;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE pgrelay.publish_leases TO pgrelay_processor;


--
-- Name: TABLE schedule_defs; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.schedule_defs TO pgrelay_viewer;
GRANT SELECT,UPDATE ON TABLE pgrelay.schedule_defs TO pgrelay_processor;


--
-- Name: TABLE schedules; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.schedules TO pgrelay_viewer;
GRANT SELECT ON TABLE pgrelay.schedules TO pgrelay_processor;


--
-- Name: TABLE schema_functions; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.schema_functions TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.schema_functions TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.schema_functions TO pgrelay_viewer;


--
-- Name: TABLE schema_migrations; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.schema_migrations TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay.schema_migrations TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.schema_migrations TO pgrelay_viewer;


--
-- Name: TABLE sync_answers; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay.sync_answers TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.sync_answers TO pgrelay_admin;


--
-- Name: TABLE sync_asks; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay.sync_asks TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay.sync_asks TO pgrelay_admin;


--
-- Name: COLUMN this_node.node_id; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT(node_id) ON TABLE pgrelay.this_node TO pgrelay_producer;
GRANT SELECT(node_id) ON TABLE pgrelay.this_node TO pgrelay_admin;
GRANT SELECT(node_id) ON TABLE pgrelay.this_node TO pgrelay_processor;
GRANT SELECT(node_id) ON TABLE pgrelay.this_node TO pgrelay_notifier;


--
-- Name: COLUMN this_node.wake_key; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT(wake_key) ON TABLE pgrelay.this_node TO pgrelay_processor;


--
-- Name: COLUMN this_node.updated_at; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT UPDATE(updated_at) ON TABLE pgrelay.this_node TO pgrelay_processor;
GRANT UPDATE(updated_at) ON TABLE pgrelay.this_node TO pgrelay_notifier;


--
-- Name: TABLE unique_keys; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT ON TABLE pgrelay.unique_keys TO pgrelay_admin;
GRANT SELECT,DELETE,UPDATE ON TABLE pgrelay.unique_keys TO pgrelay_processor;


--
-- Name: TABLE wake_slots; Type: ACL; Schema: pgrelay; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay.wake_slots TO pgrelay_processor;


--
-- Name: TABLE debug_log; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT,INSERT,DELETE ON TABLE pgrelay_notifier.debug_log TO pgrelay_notifier;
GRANT SELECT ON TABLE pgrelay_notifier.debug_log TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay_notifier.debug_log TO pgrelay_viewer;


--
-- Name: TABLE notifications; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE pgrelay_notifier.notifications TO pgrelay_notifier;
GRANT SELECT ON TABLE pgrelay_notifier.notifications TO pgrelay_admin;


--
-- Name: COLUMN notifications.notification_id; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(notification_id) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.channel; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(channel) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.to_addrs; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(to_addrs) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.subject; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(subject) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.status; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(status) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.attempts; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(attempts) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.last_error; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(last_error) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.created_at; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(created_at) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.updated_at; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(updated_at) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.sent_at; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(sent_at) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.sending_event; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(sending_event) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: COLUMN notifications.send_in_doubt; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT SELECT(send_in_doubt) ON TABLE pgrelay_notifier.notifications TO pgrelay_viewer;


--
-- Name: TABLE status_events; Type: ACL; Schema: pgrelay_notifier; Owner: postgres
--

GRANT INSERT ON TABLE pgrelay_notifier.status_events TO pgrelay_notifier;
GRANT SELECT ON TABLE pgrelay_notifier.status_events TO pgrelay_processor;
GRANT SELECT ON TABLE pgrelay_notifier.status_events TO pgrelay_admin;
GRANT SELECT ON TABLE pgrelay_notifier.status_events TO pgrelay_viewer;


--
-- PostgreSQL database dump complete
--


