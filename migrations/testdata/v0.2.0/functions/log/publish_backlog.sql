-- publish_backlog: per publisher cursor, how many rows of its node are not
-- yet published, counted up to p_cap + 1 (a count above p_cap means "more
-- than p_cap"): cheap on any backlog, by the (node, id) index; and oldest_at,
-- the time of the oldest row not yet published (NULL when none), the
-- publisher's lag in time.

CREATE OR REPLACE FUNCTION pgrelay.publish_backlog(p_cap integer DEFAULT 100000) RETURNS TABLE(node_id integer, source text, last_id bigint, backlog bigint, updated_at timestamp with time zone, oldest_at timestamp with time zone)
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

REVOKE ALL ON FUNCTION pgrelay.publish_backlog(integer) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer, pgrelay_notifier;
GRANT ALL ON FUNCTION pgrelay.publish_backlog(p_cap integer) TO pgrelay_admin;
GRANT ALL ON FUNCTION pgrelay.publish_backlog(p_cap integer) TO pgrelay_processor;
