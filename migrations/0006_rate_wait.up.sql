-- A claim tells when a rate-limited channel it leaves ready rows of has room
-- again: _claim and _claim_channel return rate_wait_ms. Their arguments stay,
-- their result changes, which CREATE OR REPLACE cannot do: the functions of
-- the old shape go (functions/ holds the new ones), and only those: a
-- database whose functions are already this release's keeps them.
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    pg_catalog.to_regprocedure('pgrelay._claim(bigint, text, boolean, integer, text[], bigint, boolean, text[])'),
    pg_catalog.to_regprocedure('pgrelay._claim_channel(bigint, text, boolean, integer, text, text[], bigint, boolean, text[])')]
  LOOP
    IF f IS NOT NULL AND NOT EXISTS (
         SELECT FROM pg_catalog.pg_proc p
          WHERE p.oid = f AND 'rate_wait_ms' = ANY (p.proargnames)) THEN
      EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END IF;
  END LOOP;
END
$$;
