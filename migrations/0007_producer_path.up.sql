-- The helpers that only notify() and notify_many() call no longer set the
-- search_path again: they run inside those SECURITY DEFINER functions, whose
-- search_path is fixed (pg_catalog, pg_temp), and no role may execute them
-- (TestUnpinnedFunctionsAreOwnersOnly). A SET clause costs every call a
-- save and restore of the setting and a fresh namespace lookup: about 5 % of
-- a notify()'s CPU for these three together (docs/benchmarks.md, "What a SET
-- clause costs a producer"). Every function a role may execute keeps its own.
ALTER FUNCTION pgrelay._check_notify(text) RESET search_path;
ALTER FUNCTION pgrelay._enqueue(pgrelay.channels, bigint[], text[], timestamptz) RESET search_path;
ALTER FUNCTION pgrelay._enqueue_dedup(pgrelay.channels, text, timestamptz) RESET search_path;
