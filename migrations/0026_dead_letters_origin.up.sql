-- An event's dead letters by the id notify() returned: the console's event
-- page lists them newest first (DeadLettersOf) and reads the latest one's
-- payload (EventPayload). Without this index both statements read the whole
-- table. (origin_id, id) serves their ORDER BY id DESC LIMIT n without a
-- sort. It is written once per dead letter, in the transaction that writes
-- its log row.
CREATE INDEX dead_letters_origin ON pgrelay.dead_letters (origin_id, id);
