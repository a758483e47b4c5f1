-- The plans PL/pgSQL caches for the claim and the completion, made while the
-- queue was nearly empty (a Processor that starts idle, a queue that is
-- drained), read the whole queue with a sequential scan once it had grown:
-- a generic plan is kept until the queue's statistics change (autovacuum's
-- ANALYZE), and between its visits every claim and every batch of outcomes
-- scanned every row and every dead row. Without sequential scans the only
-- plans left reach the queue by its indexes (queue_ready, queue_lane,
-- queue_pkey), whatever the statistics say (TestExplainCompletePlans).
-- JIT goes with it: a statement left with no plan but a disabled one (a
-- table without a usable index, such as this_node) is costed far above
-- jit_above_cost, and was compiled on every call (70 ms each).
-- _claim_none, which _claim calls for each channel it visits, has no
-- settings of its own: it runs with those of its callers (_claim,
-- _claim_channel), and a SET clause would save and restore them on every
-- channel of every claim.
ALTER FUNCTION pgrelay._claim(bigint, text, bool, int, text[], bigint, bool, text[]) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION pgrelay._claim_channel(bigint, text, bool, int, text, text[], bigint, bool, text[]) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION pgrelay._claim_direct(text, text, bool, bigint, int, text[]) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION pgrelay._claim_lanes_direct(text, bool, bigint, int, text, bigint) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION pgrelay._ready_direct(text, bool, text[]) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION pgrelay._complete(bigint, bigint[], timestamptz[], text[], text[]) SET enable_seqscan = off SET jit = off;
