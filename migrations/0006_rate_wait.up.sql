-- A claim tells when a rate-limited channel it leaves ready rows of has room
-- again: _claim and _claim_channel return rate_wait_ms, so their old
-- signatures go (functions/ holds the new ones).
DROP FUNCTION IF EXISTS pgrelay._claim(bigint, text, boolean, integer, text[], bigint, boolean, text[]);
DROP FUNCTION IF EXISTS pgrelay._claim_channel(bigint, text, boolean, integer, text, text[], bigint, boolean, text[]);
