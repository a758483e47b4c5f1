-- _event_open: whether the event p_origin_id has a queue row (pending,
-- running or retrying): its first row has its id, later ones carry it as
-- origin_id and a retry_of (queue_retry_origin).

CREATE OR REPLACE FUNCTION pgrelay._event_open(p_origin_id bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT FROM pgrelay.queue q WHERE q.id = p_origin_id)
    OR EXISTS (SELECT FROM pgrelay.queue q WHERE q.origin_id = p_origin_id AND q.retry_of IS NOT NULL);

REVOKE ALL ON FUNCTION pgrelay._event_open(bigint) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay._event_open(p_origin_id bigint) TO pgrelay_processor;
