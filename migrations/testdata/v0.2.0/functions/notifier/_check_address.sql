-- _check_address: raises PR102 naming the address unless p_addr is an RFC 5322
-- mailbox: an addr-spec (local-part "@" domain, each a dot-atom, or a quoted
-- string / domain literal) or a name-addr ("Display Name <addr-spec>"). Group
-- syntax and obsolete forms (comments, CFWS) are refused, and so is non-ASCII
-- outside the display name (RFC 6532 is only accepted there). RFC 5321's
-- limits apply as well: at most 64 octets of local part, 254 of addr-spec;
-- a display name has at most 256 bytes.
--
-- A domain literal is accepted as Go's net/mail.ParseAddress reads it (the
-- email handler builds messages with go-mail, which parses every address
-- with it): only an IP address net.ParseIP reads, a dotted IPv4 address (no
-- leading zeros) or a plain IPv6 address (no "IPv6:" tag, no zone). Any other
-- dtext ("[IPv6:::1]", "[host]") would be stored and then fail for good when
-- sent.

CREATE OR REPLACE FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) RETURNS void
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

ALTER FUNCTION pgrelay_notifier._check_address(text, text) OWNER TO pgrelay_notifier;

REVOKE ALL ON FUNCTION pgrelay_notifier._check_address(text, text) FROM PUBLIC, pgrelay_producer, pgrelay_processor, pgrelay_admin, pgrelay_viewer;
GRANT ALL ON FUNCTION pgrelay_notifier._check_address(p_field text, p_addr text) TO pgrelay_admin;
