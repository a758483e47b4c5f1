-- Release v0.2.0: the tables, columns, indexes, roles and grants that changed
-- since v0.1.0 (0001_pgrelay, 0002_notifier). The functions and the triggers
-- that run them are not here: each has its file under functions/, which the
-- runner applies after this migration (docs/architecture.md, "The schema's
-- files"). A function this migration needs while it runs (a column default)
-- is created here first and restated by its file.
--
-- What v0.1.0 had and v0.2.0 has not, or has with another signature, goes
-- first: its file creates the new one.

DROP TRIGGER queue_wake ON pgrelay.queue;
DROP TRIGGER queue_keep_payloads ON pgrelay.queue;
DROP FUNCTION pgrelay._queue_wake();
DROP FUNCTION pgrelay._queue_keep_payloads();
DROP FUNCTION pgrelay._claim(bigint, text, boolean, integer, text[], bigint, boolean);
DROP FUNCTION pgrelay._claim_direct(text, text, boolean, bigint, integer);
DROP FUNCTION pgrelay.notify(text, text, timestamptz, interval);
DROP FUNCTION pgrelay.notify_many(text, text[], timestamptz, interval);
DROP FUNCTION pgrelay.register(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text);
DROP FUNCTION pgrelay.update(text, text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, boolean, text);
DROP FUNCTION pgrelay_notifier.create_channel(text, text, text, boolean, boolean, integer, interval, interval, interval, boolean, text);

-- ---------------------------------------------------------------------------
-- Roles
-- ---------------------------------------------------------------------------

-- The console's role: pgrelay_viewer may read what `pgrelay web` shows and
-- nothing else. It changes nothing: the console's actions (retry, discard)
-- run as pgrelay_admin (docs/dba-guide.md).
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgrelay_viewer') THEN
    BEGIN
      CREATE ROLE pgrelay_viewer NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- created meanwhile by the migration of another database
    END;
  END IF;
END
$$;

-- pgrelay_admin reads every pgrelay table, and so opens the console: it is a
-- member of pgrelay_viewer, whose rights stay in one place. Role membership
-- is cluster-wide, like the roles. A migrating login without CREATEROLE
-- (docs/dba-guide.md: the roles were created beforehand) may not grant it:
-- the DBA does, once per cluster.
DO $$
BEGIN
  IF NOT pg_catalog.pg_has_role('pgrelay_admin', 'pgrelay_viewer', 'MEMBER') THEN
    BEGIN
      GRANT pgrelay_viewer TO pgrelay_admin;
    EXCEPTION
      WHEN unique_violation THEN
        NULL;  -- granted meanwhile by the migration of another database
      WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'pgrelay_admin must be a member of pgrelay_viewer, and % may not grant roles', CURRENT_USER
          USING ERRCODE = 'insufficient_privilege',
          HINT = 'As a role with CREATEROLE (once per cluster): GRANT pgrelay_viewer TO pgrelay_admin; then migrate again.';
    END;
  END IF;
END
$$;

GRANT USAGE ON SCHEMA pgrelay, pgrelay_notifier TO pgrelay_viewer;

-- ---------------------------------------------------------------------------
-- Dead letters
-- ---------------------------------------------------------------------------

-- An event that ends 'gave_up' or 'expired' keeps its payload in
-- pgrelay.dead_letters, written in the same statement as that log row, so
-- that an admin can retry it (retry, retry_all) or discard it (discard,
-- discard_all); both log a row of their own ('retried', 'discarded'). The
-- Processor's janitor trims dead letters older than --dead-letter-retention.
--
-- One row per event that ended without success and was neither retried nor
-- discarded yet. id is the queue id of the attempt that ended, origin_id the
-- id notify() returned; node is the node that ended it (its Processor, or
-- the node decommission() ran on), run_in_node the node a node-restricted
-- event was pinned to, notification_id the notification an email event
-- carried. Replicated like pgrelay.log on a multi-master cluster.
CREATE TABLE pgrelay.dead_letters (
  id              bigint PRIMARY KEY,
  origin_id       bigint NOT NULL,
  channel         text NOT NULL,
  payload         text NOT NULL,
  attempts        int NOT NULL,
  last_error      text NULL,
  outcome         text NOT NULL,
  ended_at        timestamptz NOT NULL,
  node            int NOT NULL,
  run_in_node     int NULL,
  notification_id bigint NULL,
  CONSTRAINT dead_letters_outcome CHECK (outcome IN ('gave_up', 'expired'))
);

-- Listing a channel's dead letters, newest first, and retry_all's since.
CREATE INDEX dead_letters_channel_ended ON pgrelay.dead_letters (channel, ended_at);

-- Retention trims the oldest.
CREATE INDEX dead_letters_ended ON pgrelay.dead_letters (ended_at);

REVOKE ALL ON pgrelay.dead_letters FROM PUBLIC;

-- Admins list, retry and discard dead letters.
GRANT SELECT ON pgrelay.dead_letters TO pgrelay_admin;

-- Processors write them where events end (_complete and _rescue run as the
-- Processor). They remove none: retry() and discard() do, each with its log
-- row, and the retention trim runs as the schema's owner
-- (_trim_dead_letters), so neither the Processor's login nor a sql handler
-- (which runs as that login) can delete a chosen dead letter unlogged.
GRANT SELECT, INSERT ON pgrelay.dead_letters TO pgrelay_processor;

-- ---------------------------------------------------------------------------
-- Channels and the log
-- ---------------------------------------------------------------------------

-- Go handlers: channels of kind 'go' name a handler that a Go program
-- embedding the Processor provides (docs/go.md).
ALTER TABLE pgrelay.channels DROP CONSTRAINT channels_kind;
ALTER TABLE pgrelay.channels ADD CONSTRAINT channels_kind CHECK (kind IN ('sql', 'email', 'nats', 'go'));

-- The enqueued event: a channel with publish_enqueued logs an 'enqueued' row
-- for each event it accepts, in the transaction that enqueues it, so that a
-- subscriber on NATS sees an event's whole life (docs/events.md).
ALTER TABLE pgrelay.channels ADD COLUMN publish_enqueued boolean NOT NULL DEFAULT false;

-- Priorities: an event's priority, and a channel's default for the events
-- that name none. Higher runs first. A smallint is wide enough; the
-- functions take an int and check its range, so that an integer literal
-- reaches them without a cast. The defaults cost no rewrite: PostgreSQL
-- stores a constant default in the catalog for the rows that exist.
ALTER TABLE pgrelay.channels ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE pgrelay.queue ADD COLUMN priority smallint NOT NULL DEFAULT 0;

-- The log's events: 'retried' (a dead letter enqueued again, on the new
-- queue row), 'discarded' (a dead letter removed for good, on the queue row
-- that ended), 'enqueued' (above), 'cancelled' and 'snoozed' (below). The
-- check is added unchecked, then checked without blocking the log's readers.
ALTER TABLE pgrelay.log DROP CONSTRAINT log_event,
  ADD CONSTRAINT log_event CHECK (event IN ('succeeded', 'failed', 'gave_up', 'expired', 'deduplicated', 'adopted',
                                            'rescued', 'retried', 'discarded', 'enqueued', 'cancelled', 'snoozed'))
  NOT VALID;
ALTER TABLE pgrelay.log VALIDATE CONSTRAINT log_event;

-- go_handlers: the Go handler names of each running Processor of this node,
-- written by the Processor as it starts (_go_handlers_set). Node-local (the
-- stats of a node speak of its own Processors) and not needed by the claim:
-- it only tells operators why a go channel's events wait
-- (unhandled_go_channels()). Rows of Processors that are gone from
-- pgrelay.processors mean nothing and are deleted by the next start.
CREATE TABLE pgrelay.go_handlers (
  processor_id bigint NOT NULL,
  handler      text NOT NULL,
  PRIMARY KEY (processor_id, handler)
);

REVOKE ALL ON pgrelay.go_handlers FROM PUBLIC;
GRANT SELECT ON pgrelay.go_handlers TO pgrelay_admin;
GRANT SELECT, INSERT, DELETE ON pgrelay.go_handlers TO pgrelay_processor;
GRANT SELECT ON pgrelay.go_handlers TO pgrelay_viewer;

-- ---------------------------------------------------------------------------
-- The rejoin proof
-- ---------------------------------------------------------------------------

-- A node that comes back after being dead or adopted asks every other node
-- to answer, and claims the unrestricted rows it owns once every peer has
-- answered (or, for a peer that looks dead here, once --leader-settle has
-- passed). A node that took the leader lease asks too, and leads once every
-- live peer answered: a take of theirs at the same moment has then reached
-- it.
--
-- Why an answer proves it: a peer's answer is written after the peer applied
-- the ask, which the returning node wrote after its first heartbeat. The
-- peer's adoption of the node's rows, if any, either committed before the
-- answer — and each origin's changes are applied in commit order, so the
-- answer cannot reach the node before the adoption does — or was never made:
-- once the heartbeat is applied there, the peer sees the node alive (an
-- adoption in progress holds the node's row locked, and the heartbeat's apply
-- waits for it). This is what spock.sync_event()/wait_for_sync_event() give
-- (everything the sender committed before its event is applied), with the
-- sending side's call made part of the protocol: it holds on Spock and
-- pglogical alike, whatever the lag.
--
-- Each row is written by one node only (sync_asks by the asker, sync_answers
-- by the answerer), so these replicated tables never conflict.
CREATE TABLE pgrelay.sync_asks (
  node_id  int PRIMARY KEY,
  term     bigint NOT NULL,
  asked_at timestamptz NOT NULL DEFAULT now()
);

-- knows: the nodes the answerer knew when it answered (its pgrelay.nodes rows
-- of nodes that may adopt): a node that joined while the asker was away may be
-- unknown to the asker, which must hear from it too.
CREATE TABLE pgrelay.sync_answers (
  node_id     int NOT NULL,
  peer        int NOT NULL,
  term        bigint NOT NULL,
  knows       int[] NOT NULL,
  answered_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (node_id, peer)
);

REVOKE ALL ON pgrelay.sync_asks, pgrelay.sync_answers FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON pgrelay.sync_asks, pgrelay.sync_answers TO pgrelay_processor;
GRANT SELECT ON pgrelay.sync_asks, pgrelay.sync_answers TO pgrelay_admin;

-- ---------------------------------------------------------------------------
-- The status events' settings
-- ---------------------------------------------------------------------------

-- The cluster name a database starts with (settings.cluster_name's default;
-- restated by functions/log/_default_cluster_name.sql).
CREATE FUNCTION pgrelay._default_cluster_name() RETURNS text
LANGUAGE sql STABLE
RETURN COALESCE(NULLIF(pg_catalog.left(pg_catalog.regexp_replace(
         pg_catalog.regexp_replace(pg_catalog.current_database()::pg_catalog.text, '[^A-Za-z0-9._-]', '-', 'g'),
         '^[^A-Za-z0-9]+', ''), 63), ''), 'pgrelay');

-- The row exists only once set: no row means the defaults (schema 2, the
-- database's name), so that a node migrated before it joins a cluster
-- holds no row of this replicated table that the initial copy from
-- another node would collide with. Read through pgrelay._event_settings().
CREATE TABLE pgrelay.settings (
  singleton    boolean PRIMARY KEY DEFAULT true CONSTRAINT settings_one_row CHECK (singleton),
  event_schema int NOT NULL DEFAULT 2 CONSTRAINT settings_event_schema CHECK (event_schema IN (1, 2)),
  cluster_name text NOT NULL DEFAULT pgrelay._default_cluster_name() CONSTRAINT settings_cluster_name
                 CHECK (cluster_name OPERATOR(pg_catalog.~) '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
  updated_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE pgrelay.settings IS
  'At most one row: the document schema (1 or 2) and the cluster name of the status events on NATS; none: schema 2 and the database''s name (docs/events.md).';

-- An installation that has published keeps schema 1.
INSERT INTO pgrelay.settings (event_schema)
SELECT 1 WHERE EXISTS (SELECT FROM pgrelay.publish_cursors)
ON CONFLICT (singleton) DO NOTHING;

GRANT SELECT ON pgrelay.settings TO pgrelay_processor, pgrelay_viewer;
GRANT SELECT, INSERT (event_schema, cluster_name), UPDATE (event_schema, cluster_name, updated_at) ON pgrelay.settings TO pgrelay_admin;

-- ---------------------------------------------------------------------------
-- The console's reads
-- ---------------------------------------------------------------------------

-- The overview (queue_stats() reads the channels and the queue and EXPLAINs
-- the queue as its caller; nodes_overview() reads the nodes, the processors
-- and the queue), a channel's settings, an event's history and its payload
-- while it is kept (the queue's row, event_payloads), the per-minute counts
-- of the log (read by id: _id_floor turns a time into an id), the dead
-- letters with their payloads, and the schema's version, which the console
-- checks when it starts.
GRANT SELECT ON pgrelay.channels, pgrelay.queue, pgrelay.log, pgrelay.nodes, pgrelay.processors,
                pgrelay.event_payloads, pgrelay.dead_letters, pgrelay.schema_migrations
  TO pgrelay_viewer;

-- A notification's status history: its envelope (no body, no Cc or Bcc), its
-- status events and the handler's debug log.
GRANT SELECT (notification_id, channel, to_addrs, subject, status, attempts, last_error,
              created_at, updated_at, sent_at, sending_event, send_in_doubt)
  ON pgrelay_notifier.notifications TO pgrelay_viewer;

GRANT SELECT ON pgrelay_notifier.status_events, pgrelay_notifier.debug_log TO pgrelay_viewer;

-- The console reads one notification's status events: by its id, not by a
-- scan of the whole append-only table (its other index is the publisher's,
-- by node and id).
CREATE INDEX status_events_notification ON pgrelay_notifier.status_events (notification_id, id);

-- The function files applied (functions.go): checked by every Processor as
-- it starts, like the migrations' record. The runner creates the table.
GRANT SELECT ON pgrelay.schema_functions TO pgrelay_admin, pgrelay_processor, pgrelay_viewer;

-- ---------------------------------------------------------------------------
-- Flow control, unique keys, cancel and snooze, schedules, traces
-- ---------------------------------------------------------------------------

-- Flow control in the claim: priorities, a concurrency limit and a rate
-- limit per channel.
--
-- * Priorities. Within a channel the claim takes higher priorities first,
--   strictly; equal priorities keep the order of today (due time, then id).
--   A serialised lane ('channel' and 'payload' mode) stays FIFO: priority
--   only chooses among the heads of lanes. Across channels, a channel's
--   default priority orders the claim's visits; channels of equal priority
--   are visited in a random order each claim, sharing it fairly as before.
--   Rows of priority 0 (every row of a channel that sets none) are in no new
--   index: queue_priority holds the other rows only, so a queue that uses no
--   priority pays nothing for it, and the claim of a channel tells the two
--   cases apart with one probe of that (then empty) index.
-- * max_in_flight: at most that many events of the channel running at once,
--   events inside a running batch included. rate_limit / rate_period: at
--   most rate_limit claims (starts) in any window of rate_period. Both are
--   counted by the claim, which locks the channel's row of flow_locks until
--   it commits, so that two Processors' claims of one limited channel
--   follow each other. flow_locks and flow_starts belong to their node
--   (migrations.NodeLocalTables): in single and leader mode they bound the
--   database's Processors together; in multi-node mode each node's, which
--   claim only their own rows. A limited channel never runs in direct
--   batches (which hold their rows locked for the batch, unseen by a count):
--   its events are claimed, and run as a non-batched channel's.
--   Channels that set neither limit take none of these steps.
ALTER TABLE pgrelay.channels
  ADD COLUMN max_in_flight int,
  ADD COLUMN rate_limit int,
  ADD COLUMN rate_period interval,
  ADD CONSTRAINT channels_max_in_flight CHECK (max_in_flight IS NULL OR max_in_flight > 0),
  ADD CONSTRAINT channels_rate_limit CHECK (rate_limit IS NULL OR rate_limit > 0),
  ADD CONSTRAINT channels_rate_period CHECK ((rate_limit IS NULL) = (rate_period IS NULL)
                                             AND (rate_period IS NULL OR rate_period > interval '0'));

-- The rows of a priority other than 0, in the order a claim takes them.
CREATE INDEX queue_priority ON pgrelay.queue (channel, priority DESC, not_before, id)
  WHERE dispatched_at IS NULL AND priority <> 0;

-- The rows in flight, by Processor and channel: the rescue's index as
-- before (its leading column), and the count of a channel's running events
-- (_claim_allowance), one probe per Processor with rows in flight. The same
-- entries as before: no index more for a claim to write.
DROP INDEX pgrelay.queue_inflight;

CREATE INDEX queue_inflight ON pgrelay.queue (dispatched_by, channel)
  WHERE dispatched_at IS NOT NULL;

-- One row per limited channel, created by its first claim: the lock that
-- orders the claims of the channel on this node. Unlogged: a crash empties
-- it, and the next claim creates the row again.
CREATE UNLOGGED TABLE pgrelay.flow_locks (
  channel text PRIMARY KEY
);

-- The claims of rate-limited channels on this node within their period: when
-- (the claim's now(), as its rows' dispatched_at) and how many. A claim
-- deletes its channel's rows older than the period (and a minute).
-- Unlogged: a crash forgets the current window (one window may then hold up
-- to twice the limit).
CREATE UNLOGGED TABLE pgrelay.flow_starts (
  channel text NOT NULL,
  started_at timestamptz NOT NULL,
  n int NOT NULL CHECK (n > 0)
);

CREATE INDEX flow_starts_channel ON pgrelay.flow_starts (channel, started_at);

REVOKE ALL ON pgrelay.flow_locks, pgrelay.flow_starts FROM PUBLIC;

GRANT SELECT, INSERT, UPDATE, DELETE ON pgrelay.flow_locks, pgrelay.flow_starts TO pgrelay_processor;

GRANT SELECT ON pgrelay.flow_locks, pgrelay.flow_starts TO pgrelay_admin, pgrelay_viewer;

-- The producer's options: a priority per event, and unique keys over a
-- period. notify() and notify_many() gain, last, p_priority,
-- p_key and p_unique_for; calls that give none of them take the path of
-- before, with one test of each NULL.
--
-- Priority: p_priority (an int, so that an integer literal reaches it; its
-- range is a smallint's, checked by _priority_of) is stored in
-- queue.priority; NULL takes the channel's default (channels.priority).
-- _enqueue writes it from the channel row it is given, whose priority the
-- caller has set: no helper's signature changes.
--
-- Unique keys: a call that gives p_key or p_unique_for takes its key (the
-- payload when p_key is NULL) and returns the id of the event that holds
-- that key on the channel, if one does, instead of enqueueing. An event
-- holds its key from its call until it has ended and, with p_unique_for,
-- until that period from its call has passed, succeeded or not; an end as
-- gave_up, expired or cancelled releases it at once. The holders are rows of
-- pgrelay.unique_keys, which outlive the event's queue rows and log rows
-- (a window may outlive the log's retention).
CREATE TABLE pgrelay.unique_keys (
  -- The event holding the key (its notify() id; retries keep it).
  origin_id bigint PRIMARY KEY,
  channel   text NOT NULL,
  key_hash  bigint NOT NULL,
  key       text NOT NULL,
  -- The end of the window: the call's now() plus p_unique_for (the call's
  -- now() without it). The key is held while now() < until, or while the
  -- event has a queue row.
  until     timestamptz NOT NULL,
  -- The node that wrote the row; only it trims the row (each row of this
  -- replicated table has one writer; a release by another node is a
  -- delete, which cannot conflict with a delete).
  node      int NOT NULL,
  -- When that node's trim looks at the row next.
  check_at  timestamptz NOT NULL,
  -- The call's now().
  at        timestamptz NOT NULL,
  -- On a cluster (below): the event waits, not_before 'infinity', until its
  -- node knows the other nodes' rows of the key; due is its due time.
  held      boolean NOT NULL DEFAULT false,
  due       timestamptz
);

CREATE INDEX unique_keys_key ON pgrelay.unique_keys (channel, key_hash);

CREATE INDEX unique_keys_check ON pgrelay.unique_keys (node, check_at);

CREATE INDEX unique_keys_held ON pgrelay.unique_keys (origin_id) WHERE held;

REVOKE ALL ON pgrelay.unique_keys FROM PUBLIC;

GRANT SELECT ON pgrelay.unique_keys TO pgrelay_admin;

GRANT SELECT, UPDATE, DELETE ON pgrelay.unique_keys TO pgrelay_processor;

-- Unique keys on a multi-master cluster. Two nodes can accept one key
-- before either sees the other's row, and in multi-node mode each claims
-- only its own rows: a keyed event enqueued while other nodes are known is
-- held (not_before 'infinity'), and its owner node decides it once it knows
-- every other node's rows of ids below it. Every node decides the same way:
-- the survivor is the lowest id among the rows that hold the key; a held
-- event that is not it ends 'deduplicated', its log row naming the survivor,
-- and the survivor is released to its due time.
--
-- What proves that the other nodes' rows below an id are here: each answer
-- to this node's ask (the rejoin proof, above) now carries the answering
-- node's horizon, the id below which every transaction of that node has
-- committed or ended (_publish_horizon: ids carry the time they were drawn).
-- The answer was written after those commits, and each node's changes
-- arrive in commit order: when the answer is here, so are they. So a held
-- event whose id is below every peer's latest horizon is decided; while any
-- is not, the node asks again once the peers answered its last ask. A peer
-- that looks dead here (no heartbeat for p_dead_after) does not hold the
-- decision back; a peer whose answers carry no horizon (an older pgrelay,
-- or a horizon its owner cannot read: PR040) proves nothing, and an event
-- held for p_dead_after is then decided with the rows this node has. A long
-- writing transaction on another node holds its horizon back, and so these
-- decisions, as it holds back the NATS publisher.
ALTER TABLE pgrelay.sync_answers ADD COLUMN horizon bigint;

-- Cancel and snooze.
--
-- cancel(p_id) ends an event that has not ended: a pending, delayed or
-- retrying one at once ('cancelled': a log row, a status, a NATS document,
-- no dead letter); a running one finishes its attempt, and a failure then
-- ends 'cancelled' instead of retrying. A cancel is a request
-- (pgrelay.cancels, replicated): the node that runs the event applies it,
-- where it is issued or, once the request has reached it, in its
-- Processors' sweep, so that no node deletes a row another node may hold
-- (docs/multi-master.md).
--
-- A Go handler's Snooze(d) puts its event back for d without spending an
-- attempt (_snooze): the row is released, due after d, its snoozes counted
-- against _max_snoozes(); the log records 'snoozed' with the time it is due.
--
-- The completion's retry row keeps the event's priority, its sender and
-- its snoozes.

-- ---------------------------------------------------------------------------
-- The queue: who enqueued a row, how often it snoozed
-- ---------------------------------------------------------------------------

-- enqueued_by: the enqueuing role, as pgrelay_notifier._caller() names an
-- email's sender (the role set with SET ROLE, else the session's user),
-- written inline: a call per row would cost notify_many() a function call
-- per payload (TestEnqueuedByIsTheCaller ties the two). Rows enqueued
-- before this migration have none: only admins cancel them. A retry keeps
-- it; a retried dead letter is its admin's.
-- snoozes first, a smallint beside priority's: no alignment padding, as
-- the queue's rows are its hot path's pages.
ALTER TABLE pgrelay.queue ADD COLUMN snoozes smallint NOT NULL DEFAULT 0,
  ADD COLUMN enqueued_by text;

ALTER TABLE pgrelay.queue ALTER COLUMN enqueued_by
  SET DEFAULT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN SESSION_USER::text
                   ELSE pg_catalog.current_setting('role') END;

-- ---------------------------------------------------------------------------
-- Cancel requests
-- ---------------------------------------------------------------------------

-- One row per event being cancelled, replicated to every node: deleted by
-- the node that ends the event cancelled, or, once the event has ended
-- otherwise (a running attempt that succeeded), by the sweep.
CREATE TABLE pgrelay.cancels (
  origin_id    bigint PRIMARY KEY,
  requested_by text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  node         int NOT NULL DEFAULT pgrelay._this_node()
);

COMMENT ON TABLE pgrelay.cancels IS
  'Cancel requests (pgrelay.cancel): applied by the node that runs the event; a running attempt that fails ends cancelled.';

GRANT SELECT, DELETE ON pgrelay.cancels TO pgrelay_processor;

GRANT SELECT ON pgrelay.cancels TO pgrelay_viewer;

-- Periodic events: pgrelay.schedule() defines a named schedule (an interval,
-- p_every, or a cron expression, p_cron, in a time zone), pgrelay.unschedule()
-- removes it, and the Processor fires each tick once: in one transaction
-- holding the schedule's row lock it enqueues the event with
-- pgrelay.notify() and advances next_fire. A schedule is owned by a node
-- (owner_node, as the queue's rows are): in multi-node mode only its owner
-- fires it, and a dead node's schedules are adopted with its events
-- (_adopt_rows); in single mode any Processor of the database fires, in
-- leader mode the leader's node (_claim_scope, the claim's rule). After a
-- downtime a schedule fires once, then continues from the first tick after
-- now: missed ticks are not replayed one by one.
--
-- Cron expressions are computed in Go (github.com/robfig/cron/v3, standard
-- five fields); _cron_error checks them here, at schedule() time, with a
-- grammar no wider than the library's (a test compares the two). A cron
-- schedule's first next_fire is computed by the Processor that owns it (NULL
-- until then); an interval schedule's ticks are computed here.

-- ---------------------------------------------------------------------------
-- The table
-- ---------------------------------------------------------------------------

-- schedule_defs: one row a schedule. anchor: when its timing was last set
-- (an interval schedule ticks at anchor + k × every; a cron schedule's first
-- tick is the first after it). next_fire: the next tick (NULL: a cron
-- schedule whose first tick no Processor has computed yet; 'infinity': a
-- cron expression that never matches). last_due: the tick the last fire was
-- for; last_fire: when it fired.
CREATE TABLE pgrelay.schedule_defs (
  name        text PRIMARY KEY,
  channel     text NOT NULL,
  payload     text NOT NULL,
  every       interval,
  cron        text,
  timezone    text NOT NULL DEFAULT 'UTC',
  owner_node  int NOT NULL DEFAULT pgrelay._this_node(),
  anchor      timestamptz NOT NULL DEFAULT now(),
  next_fire   timestamptz,
  last_due    timestamptz,
  last_fire   timestamptz,
  last_event  bigint,
  last_error  text,
  fires       bigint NOT NULL DEFAULT 0,
  created_by  name NOT NULL DEFAULT session_user,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT schedule_defs_one_timing CHECK ((every IS NULL) <> (cron IS NULL))
);

-- The scheduler's look-ups: a node's schedules by their next tick.
CREATE INDEX schedule_defs_owner_next ON pgrelay.schedule_defs (owner_node, next_fire);

-- The view, pgrelay.schedules, is in its file (functions/schedules/).
REVOKE ALL ON pgrelay.schedule_defs FROM PUBLIC;

GRANT SELECT ON pgrelay.schedule_defs TO pgrelay_viewer;

GRANT SELECT, UPDATE ON pgrelay.schedule_defs TO pgrelay_processor;

-- An event's dead letters by the id notify() returned: the console's event
-- page lists them newest first (DeadLettersOf) and reads the latest one's
-- payload (EventPayload). Without this index both statements read the whole
-- table. (origin_id, id) serves their ORDER BY id DESC LIMIT n without a
-- sort. It is written once per dead letter, in the transaction that writes
-- its log row.
CREATE INDEX dead_letters_origin ON pgrelay.dead_letters (origin_id, id);

-- Trace context: the W3C traceparent of the producer's span,
-- stored with an event when its producer traces, so that a Processor's span
-- of every attempt (the first and each retry) links to it. An event's row
-- exists only when its producer gave one: an untraced enqueue writes
-- nothing here. Keyed by the event's origin id, which every retry keeps.
-- A traceparent of version 00 is 55 characters: bounded by the CHECK.
CREATE TABLE pgrelay.event_traces (
  origin_id bigint PRIMARY KEY,
  traceparent text NOT NULL
    CONSTRAINT event_traces_traceparent CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$')
);

GRANT SELECT ON pgrelay.event_traces TO pgrelay_processor, pgrelay_admin, pgrelay_viewer;

-- An event's priority in its log rows and its dead letter. log.priority is
-- written by every function that logs an event (the NATS documents carry it
-- as "priority"); dead_letters.priority is what a retry enqueues the event
-- at again. NULL for priority 0: most events have priority 0, and a NULL
-- costs their rows nothing (a success's row, whose error is NULL, has a
-- null bitmap already). Nullable without a default: added in the catalog
-- only, no rewrite of either table. IF NOT EXISTS: development.go applies
-- these two statements to a database migrated by a development build that
-- recorded 0003_v0_2_0 before they were part of it.
ALTER TABLE pgrelay.log ADD COLUMN IF NOT EXISTS priority smallint NULL;
ALTER TABLE pgrelay.dead_letters ADD COLUMN IF NOT EXISTS priority smallint NULL;
