package store

import "github.com/jackc/pgx/v5"

// SearchPath is the search_path of pgrelay's own sessions: the background
// pool, the listener, the publisher and the commands' connections. Only
// pg_catalog's functions, operators and types resolve there (temporary
// objects come last, and never for functions or operators), so a look-alike
// planted in a schema of the login's search_path (public) is never called
// by pgrelay's statements. The hot pool keeps the login's search_path for
// the handlers' SQL: pgrelay's statements on it name pg_catalog themselves.
const SearchPath = "pg_catalog, pg_temp"

// PinSearchPath makes cc's sessions start with SearchPath. A startup
// parameter, it wins over ALTER ROLE / ALTER DATABASE ... SET search_path.
func PinSearchPath(cc *pgx.ConnConfig) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["search_path"] = SearchPath
}
