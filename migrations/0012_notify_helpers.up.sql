-- As 0007, for the two other helpers every notify() and notify_many() call
-- runs: _lock_channel (called by _check_notify only) and _due (called by
-- notify(), notify_many() and _retry_dead, each with a fixed search_path).
-- No role may execute either (TestUnpinnedFunctionsAreOwnersOnly), so they
-- only ever run inside a function whose search_path is fixed; the SET
-- clause cost each call a save and restore of the setting.
ALTER FUNCTION pgrelay._lock_channel(text) RESET search_path;
ALTER FUNCTION pgrelay._due(timestamptz, interval) RESET search_path;
