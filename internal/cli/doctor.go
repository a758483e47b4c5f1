package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/migrations"
)

// Severities of a doctor finding. A problem makes `pgrelay doctor` exit 1; a
// warning is printed but leaves the exit status 0: it names a default or a
// choice that is fine on some installations (PUBLIC's CONNECT, an owner that
// is a superuser) and worth a look on others.
const (
	severityProblem = "problem"
	severityWarning = "warning"
)

// doctorFinding is one thing `pgrelay doctor` found: a short stable id, its
// severity, the database it is about (host:port/name, no credentials; empty
// for a finding about the cluster as a whole), what is wrong and the fix.
type doctorFinding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Database string `json:"database,omitempty"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

// doctorConfig is what the checks need besides a connection.
type doctorConfig struct {
	// processorRole is the Processor's login; empty: every login that is a
	// member of pgrelay_processor.
	processorRole string
	// maxTransactionAge: an open transaction older than this holding back
	// vacuum is a finding.
	maxTransactionAge time.Duration
	// maxPublishAge: an unpublished log row older than this is a finding.
	maxPublishAge time.Duration
	// maxClockSkew: nodes whose clocks differ by more than this are a finding.
	maxClockSkew time.Duration
}

// doctorNode is one database given with --database-url.
type doctorNode struct {
	label   string
	conn    *pgx.Conn
	nodeID  int
	skew    time.Duration // the server's clock minus this machine's
	cluster bool          // a node of a multi-master cluster
	owner   string        // owner of schema pgrelay
	ownerID uint32
	dbName  string // current_database()
	// loginPath: the login's own search_path, read before the session's
	// was pinned to pgrelay's (every other statement of doctor runs under
	// that: what it names unqualified resolves in pg_catalog).
	loginPath string
}

// urlList is a flag that may be given several times.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(v string) error {
	*u = append(*u, v)
	return nil
}

// runDoctor checks an installation and prints what it finds with the fix:
//
//	pgrelay doctor --database-url URL [--database-url URL2 ...] [--json]
func runDoctor(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("doctor")
	var urls urlList
	fs.Var(&urls, "database-url", "PostgreSQL URL (required); give it once per node to check a multi-master cluster")
	asJSON := fs.Bool("json", false, "print the findings as a JSON array")
	procRole := fs.String("processor-role", "", "the Processor's login (default: every login that is a member of pgrelay_processor)")
	maxTx := fs.Duration("max-transaction-age", 5*time.Minute, "an open transaction older than this, holding back the queue's vacuum, is a finding")
	maxPub := fs.Duration("max-publish-age", 24*time.Hour, "an unpublished log row older than this is a finding")
	maxSkew := fs.Duration("max-clock-skew", time.Second, "nodes whose clocks differ by more than this are a finding")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if len(urls) == 0 {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	cfg := doctorConfig{processorRole: *procRole, maxTransactionAge: *maxTx, maxPublishAge: *maxPub, maxClockSkew: *maxSkew}
	findings, err := doctor(ctx, urls, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if findings == nil {
			findings = []doctorFinding{}
		}
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(findings); err != nil {
			return err
		}
	} else {
		printFindings(a, findings)
	}
	if n := countSeverity(findings, severityProblem); n > 0 {
		return fmt.Errorf("%d %s found", n, doctorPlural(n, "problem"))
	}
	return nil
}

func doctorPlural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func countSeverity(fs []doctorFinding, sev string) int {
	n := 0
	for _, f := range fs {
		if f.Severity == sev {
			n++
		}
	}
	return n
}

// printFindings prints one block per finding: severity, id and database on
// the first line, the message, then the fix indented.
func printFindings(a *app, findings []doctorFinding) {
	for _, f := range findings {
		where := ""
		if f.Database != "" {
			where = " (" + f.Database + ")"
		}
		fmt.Fprintf(a.stdout, "%-7s  %s%s\n", strings.ToUpper(f.Severity), f.ID, where)
		fmt.Fprintf(a.stdout, "         %s\n", f.Message)
		if f.Fix != "" {
			for i, l := range strings.Split(f.Fix, "\n") {
				if i == 0 {
					fmt.Fprintf(a.stdout, "   fix:  %s\n", l)
				} else {
					fmt.Fprintf(a.stdout, "         %s\n", l)
				}
			}
		}
	}
	p, w := countSeverity(findings, severityProblem), countSeverity(findings, severityWarning)
	if p+w == 0 {
		fmt.Fprintln(a.stdout, "no problems found")
		return
	}
	fmt.Fprintf(a.stdout, "%d %s, %d %s\n", p, doctorPlural(p, "problem"), w, doctorPlural(w, "warning"))
}

// doctor connects to every URL, runs every check and returns the findings,
// problems first. An error means it could not run (connect, no schema); a
// check that fails becomes a finding of its own.
func doctor(ctx context.Context, urls []string, cfg doctorConfig) ([]doctorFinding, error) {
	var nodes []*doctorNode
	defer func() {
		for _, n := range nodes {
			n.conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for _, u := range urls {
		n, err := connectDoctor(ctx, u)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	var out []doctorFinding
	for _, n := range nodes {
		fs, err := n.start(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	cluster := len(nodes) > 1
	for _, n := range nodes {
		if n.cluster {
			cluster = true
		}
	}
	for _, n := range nodes {
		n.cluster = cluster
		for _, c := range doctorChecks() {
			fs, err := c.run(ctx, n, cfg)
			if err != nil {
				out = append(out, doctorFinding{ID: c.id + "-unchecked", Severity: severityProblem, Database: n.label,
					Message: fmt.Sprintf("could not check %s: %s", c.what, oneLine(err.Error())),
					Fix:     "run pgrelay doctor as the schema's owner or a superuser"})
				continue
			}
			for i := range fs {
				fs[i].Database = n.label
			}
			out = append(out, fs...)
		}
	}
	if cluster {
		out = append(out, nodeIDFindings(nodes)...)
		out = append(out, skewFindings(nodes, cfg.maxClockSkew)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Severity != out[j].Severity {
			return out[i].Severity == severityProblem
		}
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Database < out[j].Database
	})
	return out, nil
}

// connectDoctor connects and measures the server's clock against this
// machine's: the server's clock_timestamp() minus the middle of the round
// trip.
func connectDoctor(ctx context.Context, url string) (*doctorNode, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the database: invalid --database-url: %w", err)
	}
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the database: %w", err)
	}
	n := &doctorNode{conn: conn, label: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database}
	if err := conn.QueryRow(cctx, "SELECT pg_catalog.current_setting('search_path'::pg_catalog.text)").Scan(&n.loginPath); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: read the search_path: %w", n.label, err)
	}
	if _, err := conn.Exec(cctx, "SELECT pg_catalog.set_config('search_path'::pg_catalog.text, $1::pg_catalog.text, false)", store.SearchPath); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: set the search_path: %w", n.label, err)
	}
	before := time.Now()
	var server time.Time
	if err := conn.QueryRow(cctx, "SELECT pg_catalog.clock_timestamp()").Scan(&server); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: read the clock: %w", n.label, err)
	}
	after := time.Now()
	n.skew = server.Sub(before.Add(after.Sub(before) / 2))
	return n, nil
}

// start reads what every check needs: the schema version, pgrelay's owner,
// the node id, whether a replication extension is installed.
func (n *doctorNode) start(ctx context.Context) ([]doctorFinding, error) {
	v, err := migrations.Current(ctx, n.conn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.label, err)
	}
	if v == 0 {
		return nil, fmt.Errorf("%s: pgrelay is not installed in this database: run 'pgrelay migrate' first", n.label)
	}
	var out []doctorFinding
	if want := migrations.Latest(); v < want {
		out = append(out, doctorFinding{ID: "schema-outdated", Severity: severityProblem, Database: n.label,
			Message: fmt.Sprintf("the schema is at version %d, this pgrelay's is %d: a Processor of this version refuses to start", v, want),
			Fix:     "pgrelay migrate --database-url <this database's URL>"})
	}
	info, err := store.ReadSchemaInfo(ctx, n.conn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.label, err)
	}
	n.owner, n.ownerID, n.nodeID, n.dbName, n.cluster = info.Owner, info.OwnerID, info.Node, info.Database, info.Cluster
	return out, nil
}

// doctorCheck is one group of checks.
type doctorCheck struct {
	id   string // prefix of the finding that says the check could not run
	what string
	run  func(ctx context.Context, n *doctorNode, cfg doctorConfig) ([]doctorFinding, error)
}

func doctorChecks() []doctorCheck {
	return []doctorCheck{
		{"roles", "pgrelay's roles", checkRoles},
		{"public-privileges", "PUBLIC's privileges on pgrelay's objects", checkPublicPrivileges},
		{"owner", "who owns pgrelay's objects", checkOwners},
		{"public-database", "PUBLIC's privileges on the database", checkPublicDatabase},
		{"search-path", "the Processor's search_path", checkSearchPath},
		{"replication", "replication", checkClusterReplication},
		{"publisher", "the NATS publisher", checkPublisher},
		{"vacuum", "the queue's vacuum", checkVacuum},
	}
}

// pgrelayRoles are the NOLOGIN roles pgrelay migrate creates.
var pgrelayRoles = []string{"pgrelay_admin", "pgrelay_notifier", "pgrelay_processor", "pgrelay_producer", "pgrelay_viewer"}

func checkRoles(ctx context.Context, n *doctorNode, _ doctorConfig) ([]doctorFinding, error) {
	rows, err := n.conn.Query(ctx, `SELECT w.name, r.oid IS NOT NULL, COALESCE(r.rolcanlogin, false)
		FROM pg_catalog.unnest($1::text[]) w(name)
		LEFT JOIN pg_catalog.pg_roles r ON r.rolname = w.name ORDER BY 1`, pgrelayRoles)
	if err != nil {
		return nil, err
	}
	var out []doctorFinding
	var name string
	var exists, login bool
	_, err = pgx.ForEachRow(rows, []any{&name, &exists, &login}, func() error {
		switch {
		case !exists:
			out = append(out, doctorFinding{ID: "role-missing", Severity: severityProblem,
				Message: fmt.Sprintf("role %s does not exist: the logins that should hold it cannot use pgrelay", name),
				Fix:     fmt.Sprintf("CREATE ROLE %s NOLOGIN;  -- then its GRANT lines of the schema snapshot, migrations/testdata/schema.sql (docs/reference.md, Roles and privileges)", pgx.Identifier{name}.Sanitize())})
		case login:
			out = append(out, doctorFinding{ID: "role-login", Severity: severityProblem,
				Message: fmt.Sprintf("role %s can log in: pgrelay's roles are granted to logins, never logged in as", name),
				Fix:     fmt.Sprintf("ALTER ROLE %s NOLOGIN;", pgx.Identifier{name}.Sanitize())})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Logins that hold pgrelay_notifier: its SECURITY DEFINER functions are
	// the notifier's boundary; only the owner (who gave it its functions) may
	// be a member.
	members, err := loginMembers(ctx, n.conn, "pgrelay_notifier")
	if err != nil {
		return nil, err
	}
	var bad, fix []string
	for _, m := range members {
		if m != n.owner {
			bad = append(bad, m)
			fix = append(fix, fmt.Sprintf("REVOKE pgrelay_notifier FROM %s;", pgx.Identifier{m}.Sanitize()))
		}
	}
	if len(bad) > 0 {
		out = append(out, doctorFinding{ID: "notifier-member", Severity: severityProblem,
			Message: fmt.Sprintf("logins that are members of pgrelay_notifier besides the owner %s: %s (they can act as the notifier: change any email and its status)",
				n.owner, strings.Join(bad, ", ")),
			Fix: strings.Join(fix, "\n") + "\n-- a membership through another role: revoke that role's instead"})
	}
	return out, nil
}

// loginMembers returns the logins that are members of role, directly or
// through other roles (not superusers that are no member).
func loginMembers(ctx context.Context, conn *pgx.Conn, role string) ([]string, error) {
	rows, err := conn.Query(ctx, `WITH RECURSIVE m(oid) AS (
		  SELECT a.member FROM pg_catalog.pg_auth_members a JOIN pg_catalog.pg_roles r ON r.oid = a.roleid
		   WHERE r.rolname = $1
		  UNION
		  SELECT a.member FROM pg_catalog.pg_auth_members a JOIN m ON a.roleid = m.oid)
		SELECT r.rolname::text FROM pg_catalog.pg_roles r JOIN m ON m.oid = r.oid
		WHERE r.rolcanlogin ORDER BY 1`, role)
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", role, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", role, err)
	}
	return out, nil
}

// pgrelayObjects lists pgrelay's schemas, relations and functions with
// their kind (as GRANT and ALTER name it), name, owner and ACL entries
// (the defaults when the ACL is NULL).
const pgrelayObjects = `WITH o(kind, name, owner, acl, schema) AS (
	  SELECT 'SCHEMA', pg_catalog.quote_ident(s.nspname), s.nspowner,
	         COALESCE(s.nspacl, pg_catalog.acldefault('n'::"char", s.nspowner)), s.nspname
	    FROM pg_catalog.pg_namespace s WHERE s.nspname IN ('pgrelay', 'pgrelay_notifier')
	  UNION ALL
	  SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END,
	         pg_catalog.format('%I.%I', s.nspname, c.relname), c.relowner,
	         COALESCE(c.relacl, pg_catalog.acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner)), s.nspname
	    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
	   WHERE s.nspname IN ('pgrelay', 'pgrelay_notifier') AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
	  UNION ALL
	  SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
	         pg_catalog.format('%I.%I(%s)', s.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
	         p.proowner, COALESCE(p.proacl, pg_catalog.acldefault('f'::"char", p.proowner)), s.nspname
	    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace s ON s.oid = p.pronamespace
	   WHERE s.nspname IN ('pgrelay', 'pgrelay_notifier'))
	`

func checkPublicPrivileges(ctx context.Context, n *doctorNode, _ doctorConfig) ([]doctorFinding, error) {
	rows, err := n.conn.Query(ctx, pgrelayObjects+`
		SELECT o.kind, o.name, pg_catalog.string_agg(DISTINCT a.privilege_type, ', ')
		  FROM o, pg_catalog.aclexplode(o.acl) a
		 WHERE a.grantee = 0
		 GROUP BY o.kind, o.name ORDER BY o.kind DESC, o.name`)
	if err != nil {
		return nil, err
	}
	var list, fix []string
	var kind, name, privs string
	_, err = pgx.ForEachRow(rows, []any{&kind, &name, &privs}, func() error {
		list = append(list, fmt.Sprintf("%s %s (%s)", strings.ToLower(kind), name, privs))
		fix = append(fix, fmt.Sprintf("REVOKE ALL ON %s %s FROM PUBLIC;", kind, name))
		return nil
	})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return []doctorFinding{{ID: "public-privileges", Severity: severityProblem,
		Message: "PUBLIC (every login) has privileges on pgrelay's objects: " + strings.Join(list, "; "),
		Fix:     strings.Join(fix, "\n")}}, nil
}

func checkOwners(ctx context.Context, n *doctorNode, _ doctorConfig) ([]doctorFinding, error) {
	var out []doctorFinding
	// The notifier's functions belong to pgrelay_notifier; every other
	// object to the owner of schema pgrelay.
	rows, err := n.conn.Query(ctx, pgrelayObjects+`
		SELECT o.kind, o.name, pg_catalog.pg_get_userbyid(o.owner)::text,
		       CASE WHEN o.schema = 'pgrelay_notifier' AND o.kind IN ('FUNCTION', 'PROCEDURE') THEN 'pgrelay_notifier' ELSE $1 END
		  FROM o
		 WHERE pg_catalog.pg_get_userbyid(o.owner) <>
		       CASE WHEN o.schema = 'pgrelay_notifier' AND o.kind IN ('FUNCTION', 'PROCEDURE') THEN 'pgrelay_notifier' ELSE $1 END
		 ORDER BY 4, 1 DESC, 2`, n.owner)
	if err != nil {
		return nil, err
	}
	var notifier, mixed, notifierFix, mixedFix []string
	var kind, name, owner, want string
	_, err = pgx.ForEachRow(rows, []any{&kind, &name, &owner, &want}, func() error {
		stmt := fmt.Sprintf("ALTER %s %s OWNER TO %s;", kind, name, pgx.Identifier{want}.Sanitize())
		if want == "pgrelay_notifier" {
			notifier = append(notifier, fmt.Sprintf("%s (owner %s)", name, owner))
			notifierFix = append(notifierFix, stmt)
		} else {
			mixed = append(mixed, fmt.Sprintf("%s %s (owner %s)", strings.ToLower(kind), name, owner))
			mixedFix = append(mixedFix, stmt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(notifier) > 0 {
		out = append(out, doctorFinding{ID: "notifier-function-owner", Severity: severityProblem,
			Message: "functions of pgrelay_notifier not owned by the role pgrelay_notifier (their SECURITY DEFINER code runs as their owner): " +
				strings.Join(notifier, ", "),
			Fix: strings.Join(notifierFix, "\n") + "\n-- as a non-superuser: GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier first, REVOKE it after"})
	}
	if len(mixed) > 0 {
		out = append(out, doctorFinding{ID: "owner-mixed", Severity: severityProblem,
			Message: fmt.Sprintf("pgrelay's objects have more than one owner; schema pgrelay belongs to %s, but: %s", n.owner, strings.Join(mixed, ", ")),
			Fix:     strings.Join(mixedFix, "\n")})
	}

	// Logins that are producers and (members of) the owner: they can
	// change pgrelay itself, and its SECURITY DEFINER functions run as them.
	rows, err = n.conn.Query(ctx, `WITH RECURSIVE producers(oid) AS (
		  SELECT a.member FROM pg_catalog.pg_auth_members a JOIN pg_catalog.pg_roles r ON r.oid = a.roleid
		   WHERE r.rolname = 'pgrelay_producer'
		  UNION
		  SELECT a.member FROM pg_catalog.pg_auth_members a JOIN producers p ON a.roleid = p.oid),
		owners(oid) AS (
		  SELECT $1::oid
		  UNION
		  SELECT a.member FROM pg_catalog.pg_auth_members a JOIN owners o ON a.roleid = o.oid)
		SELECT r.rolname::text FROM pg_catalog.pg_roles r
		 WHERE r.oid IN (SELECT oid FROM producers) AND r.oid IN (SELECT oid FROM owners)
		 ORDER BY 1`, n.ownerID)
	if err != nil {
		return nil, err
	}
	both, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(both) > 0 {
		var fix []string
		for _, r := range both {
			if r == n.owner {
				fix = append(fix, fmt.Sprintf("REVOKE pgrelay_producer FROM %s;  -- and give the application a login of its own", pgx.Identifier{r}.Sanitize()))
			} else {
				fix = append(fix, fmt.Sprintf("REVOKE %s FROM %s;", pgx.Identifier{n.owner}.Sanitize(), pgx.Identifier{r}.Sanitize()))
			}
		}
		out = append(out, doctorFinding{ID: "owner-producer", Severity: severityProblem,
			Message: fmt.Sprintf("roles that are producers (pgrelay_producer) and hold the rights of pgrelay's owner %s: %s (a producer could change pgrelay's functions and tables)",
				n.owner, strings.Join(both, ", ")),
			Fix: strings.Join(fix, "\n") + "\n-- a membership through another role: revoke that role's instead"})
	}

	var super bool
	if err := n.conn.QueryRow(ctx, "SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = $1", n.ownerID).Scan(&super); err != nil {
		return nil, err
	}
	if super {
		out = append(out, doctorFinding{ID: "owner-superuser", Severity: severityWarning,
			Message: fmt.Sprintf("pgrelay's owner %s is a superuser: its SECURITY DEFINER functions run with every right on the server", n.owner),
			Fix:     "install with a dedicated owner login that is no superuser (docs/dba-guide.md, Installing and upgrading)"})
	}
	return out, nil
}

func checkPublicDatabase(ctx context.Context, n *doctorNode, _ doctorConfig) ([]doctorFinding, error) {
	rows, err := n.conn.Query(ctx, `SELECT d.datname::text, a.privilege_type
		FROM pg_catalog.pg_database d, pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d'::"char", d.datdba))) a
		WHERE d.datname = pg_catalog.current_database() AND a.grantee = 0 AND a.privilege_type IN ('CONNECT', 'TEMPORARY')
		ORDER BY 2`)
	if err != nil {
		return nil, err
	}
	var out []doctorFinding
	var db, priv string
	_, err = pgx.ForEachRow(rows, []any{&db, &priv}, func() error {
		d := pgx.Identifier{db}.Sanitize()
		switch priv {
		case "CONNECT":
			out = append(out, doctorFinding{ID: "public-connect", Severity: severityWarning,
				Message: fmt.Sprintf("PUBLIC may connect to database %s (PostgreSQL's default): any login can connect, LISTEN for pgrelay's wake-ups and send forged ones (each costs a Processor one claim)", db),
				Fix: fmt.Sprintf("REVOKE CONNECT ON DATABASE %s FROM PUBLIC;\nGRANT CONNECT ON DATABASE %s TO pgrelay_producer, pgrelay_processor, pgrelay_admin;"+
					"  -- and to your application's other logins", d, d)})
		case "TEMPORARY":
			out = append(out, doctorFinding{ID: "public-temp", Severity: severityWarning,
				Message: fmt.Sprintf("PUBLIC may create temporary objects in database %s (PostgreSQL's default)", db),
				Fix:     fmt.Sprintf("REVOKE TEMPORARY ON DATABASE %s FROM PUBLIC;  -- grant it back to the logins that need it", d)})
		}
		return nil
	})
	return out, err
}

// goSideBuiltins are built-in functions the Processor's Go code calls in
// its own statements (the migrations' calls are read from the migrations).
var goSideBuiltins = []string{
	"pg_backend_pid", "now", "clock_timestamp",
	"date_part", "extract", "count", "unnest", "current_setting", "set_config", "hashtextextended",
	"txid_current", "length", "octet_length", "array_agg", "format", "to_regclass", "floor",
}

var sqlCall = regexp.MustCompile(`(?i)\b([a-z_][a-z0-9_]*)\s*\(`)

// builtinNames are the names of functions pgrelay's SQL calls: every
// identifier followed by "(" in the migrations, and goSideBuiltins. Only
// those that name a function of pg_catalog matter (the query filters).
func builtinNames() ([]string, error) {
	all, err := migrations.All()
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, b := range goSideBuiltins {
		set[b] = true
	}
	for _, m := range all {
		for _, g := range sqlCall.FindAllStringSubmatch(m.SQL, -1) {
			set[strings.ToLower(g[1])] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// splitSearchPath splits a search_path value into schema names.
func splitSearchPath(v string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' && quoted && i+1 < len(v) && v[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		case !quoted && (c == ' ' || c == '\t'):
		default:
			if !quoted {
				c = strings.ToLower(string(c))[0]
			}
			cur.WriteByte(c)
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" || len(out) > 0 {
		out = append(out, s)
	}
	return out
}

func checkSearchPath(ctx context.Context, n *doctorNode, cfg doctorConfig) ([]doctorFinding, error) {
	// The Processor's logins.
	var procs []string
	if cfg.processorRole != "" {
		var exists bool
		if err := n.conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $1)", cfg.processorRole).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			return nil, fmt.Errorf("--processor-role %s: no such role", cfg.processorRole)
		}
		procs = []string{cfg.processorRole}
	} else {
		var err error
		if procs, err = loginMembers(ctx, n.conn, "pgrelay_processor"); err != nil {
			return nil, err
		}
	}
	if procs == nil {
		procs = []string{} // an empty array, not NULL: "<> ALL (NULL)" is never true
	}
	// Their search_path: the database's (as this session sees it) and any
	// ALTER ROLE/DATABASE ... SET search_path that applies to them.
	paths := []string{n.loginPath}
	rows, err := n.conn.Query(ctx, `SELECT pg_catalog.substr(c, pg_catalog.strpos(c, '=') + 1)
		FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
		WHERE s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))
		  AND (s.setrole = 0 OR s.setrole IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ANY ($1)))
		  AND c LIKE 'search\_path=%'`, procs)
	if err != nil {
		return nil, err
	}
	set, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	paths = append(paths, set...)
	schemaSet := map[string]bool{}
	for _, p := range paths {
		for _, s := range splitSearchPath(p) {
			switch s {
			case "$user":
				for _, r := range procs {
					schemaSet[r] = true
				}
			case "", "pg_catalog", "pg_temp":
			default:
				schemaSet[s] = true
			}
		}
	}
	schemas := make([]string, 0, len(schemaSet))
	for s := range schemaSet {
		schemas = append(schemas, s)
	}
	sort.Strings(schemas)

	var out []doctorFinding
	// Who may create objects in those schemas, besides the superusers,
	// pgrelay's owner and the Processor's logins themselves.
	rows, err = n.conn.Query(ctx, `SELECT s.nspname::text, 'PUBLIC', false, 0
		  FROM pg_catalog.pg_namespace s, pg_catalog.aclexplode(COALESCE(s.nspacl, pg_catalog.acldefault('n'::"char", s.nspowner))) a
		 WHERE s.nspname = ANY ($1) AND a.grantee = 0 AND a.privilege_type = 'CREATE'
		UNION ALL
		SELECT s.nspname::text, r.rolname::text, pg_catalog.pg_has_role(r.oid, s.nspowner, 'USAGE'), 1
		  FROM pg_catalog.pg_namespace s, pg_catalog.pg_roles r
		 WHERE s.nspname = ANY ($1) AND r.rolcanlogin AND NOT r.rolsuper AND r.oid <> $2
		   AND r.rolname <> ALL ($3) AND pg_catalog.has_schema_privilege(r.oid, s.oid, 'CREATE')
		ORDER BY 1, 4, 2`, schemas, n.ownerID, procs)
	if err != nil {
		return nil, err
	}
	var writers, fix []string
	var schema, who string
	var owns bool
	publicCreate := map[string]bool{}
	var order int
	_, err = pgx.ForEachRow(rows, []any{&schema, &who, &owns, &order}, func() error {
		// Where PUBLIC may create, the logins that may only through it are
		// no news; their owners are.
		if who == "PUBLIC" {
			publicCreate[schema] = true
		} else if publicCreate[schema] && !owns {
			return nil
		}
		writers = append(writers, fmt.Sprintf("%s (schema %s)", who, schema))
		s := pgx.Identifier{schema}.Sanitize()
		switch {
		case who == "PUBLIC":
			fix = append(fix, fmt.Sprintf("REVOKE CREATE ON SCHEMA %s FROM PUBLIC;", s))
		case owns:
			fix = append(fix, fmt.Sprintf("-- %s owns schema %s (or is the database's owner, PostgreSQL 15's owner of public): take %s off the Processor's search_path,\n"+
				"-- e.g. ALTER ROLE <processor login> SET search_path = pg_catalog, pg_temp; (its sql handlers then name their schemas)", who, schema, s))
		default:
			fix = append(fix, fmt.Sprintf("REVOKE CREATE ON SCHEMA %s FROM %s;  -- or from the role it holds CREATE through", s, pgx.Identifier{who}.Sanitize()))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(writers) > 0 {
		out = append(out, doctorFinding{ID: "search-path-writable", Severity: severityProblem,
			Message: fmt.Sprintf("roles other than pgrelay's owner may create objects in a schema on the Processor's search_path (%s): %s; "+
				"a look-alike of a built-in there can be called instead of it", strings.Join(schemas, ", "), strings.Join(writers, ", ")),
			Fix: strings.Join(fix, "\n")})
	}

	// Look-alikes of the built-ins pgrelay calls, and of operators, in any
	// schema but pg_catalog.
	names, err := builtinNames()
	if err != nil {
		return nil, err
	}
	rows, err = n.conn.Query(ctx, `WITH names AS (
		  SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p
		   WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY ($1)),
		objs(kind, name, schema, ext) AS (
		  SELECT 'FUNCTION', pg_catalog.format('%I.%I(%s)', s.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
		         s.nspname, (SELECT x.extname FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid
		                      WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
		    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace s ON s.oid = p.pronamespace
		   WHERE p.proname IN (SELECT proname FROM names)
		  UNION ALL
		  SELECT 'OPERATOR', pg_catalog.format('%I.%s (%s, %s)', s.nspname, o.oprname,
		           COALESCE(pg_catalog.format_type(NULLIF(o.oprleft, 0), NULL), 'NONE'), pg_catalog.format_type(o.oprright, NULL)),
		         s.nspname, (SELECT x.extname FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid
		                      WHERE d.classid = 'pg_catalog.pg_operator'::regclass AND d.objid = o.oid AND d.deptype = 'e')
		    FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_namespace s ON s.oid = o.oprnamespace
		   WHERE o.oprname IN (SELECT b.oprname FROM pg_catalog.pg_operator b WHERE b.oprnamespace = 'pg_catalog'::regnamespace))
		SELECT kind, name, schema::text, COALESCE(ext::text, '') FROM objs
		 WHERE schema NOT IN ('pg_catalog', 'information_schema') AND schema !~ '^pg_(toast|temp_|toast_temp_)'
		 ORDER BY 3, 1, 2`, names)
	if err != nil {
		return nil, err
	}
	var onPath, offPath, onFix, offFix []string
	var kind, name, ext string
	_, err = pgx.ForEachRow(rows, []any{&kind, &name, &schema, &ext}, func() error {
		label := strings.ToLower(kind) + " " + name
		stmt := fmt.Sprintf("DROP %s %s;", kind, name)
		if ext != "" {
			label += " (of extension " + ext + ")"
			stmt = fmt.Sprintf("-- %s belongs to extension %s: keep that extension's schema off the Processor's search_path", name, ext)
		}
		// An extension's objects were installed on purpose by a privileged
		// role: worth knowing, not a plant.
		if schemaSet[schema] && ext == "" {
			onPath, onFix = append(onPath, label), append(onFix, stmt)
		} else {
			offPath, offFix = append(offPath, label), append(offFix, stmt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(onPath) > 0 {
		out = append(out, doctorFinding{ID: "lookalike", Severity: severityProblem,
			Message: "on the Processor's search_path, objects named like built-ins pgrelay's SQL calls (an inexact argument type can pick them over pg_catalog's): " +
				strings.Join(onPath, ", "),
			Fix: strings.Join(onFix, "\n")})
	}
	if len(offPath) > 0 {
		out = append(out, doctorFinding{ID: "lookalike", Severity: severityWarning,
			Message: "objects named like built-ins pgrelay's SQL calls, of an extension or in schemas off the Processor's search_path: " +
				strings.Join(offPath, ", "),
			Fix: strings.Join(offFix, "\n")})
	}
	return out, nil
}

// checkClusterReplication checks, on a node of a cluster, what
// docs/multi-master.md asks: every table replicated (the rule of
// checkReplication), track_commit_timestamp on, last update wins, and
// subscriptions that forward nothing.
func checkClusterReplication(ctx context.Context, n *doctorNode, _ doctorConfig) ([]doctorFinding, error) {
	if !n.cluster {
		return nil, nil
	}
	var out []doctorFinding
	r, err := checkReplication(ctx, n.conn)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Extension == "":
		out = append(out, doctorFinding{ID: "replication-missing", Severity: severityProblem,
			Message: fmt.Sprintf("node %d has neither Spock nor pglogical: nothing of pgrelay's replicates to or from it", r.Node),
			Fix:     "set up Spock or pglogical as docs/multi-master.md (Setting up a cluster) says"})
	case len(r.Missing) > 0:
		var fix []string
		for _, t := range r.Missing {
			if r.Extension == "spock" {
				fix = append(fix, fmt.Sprintf("SELECT spock.repset_add_table('default', '%s');", t))
			} else {
				fix = append(fix, fmt.Sprintf("SELECT pglogical.replication_set_add_table('default', '%s', synchronize_data := false);", t))
			}
		}
		out = append(out, doctorFinding{ID: "replication-missing", Severity: severityProblem,
			Message: fmt.Sprintf("node %d (%s): tables in no replication set its subscriptions use: %s", r.Node, r.Extension, strings.Join(r.Missing, ", ")),
			Fix:     strings.Join(fix, "\n") + "\n-- with the set your subscriptions name, if not 'default'"})
	}
	if len(r.NodeLocal) > 0 {
		var fix []string
		for _, l := range r.NodeLocal {
			if r.Extension == "spock" {
				fix = append(fix, fmt.Sprintf("SELECT spock.repset_remove_table('%s', '%s');", l.Set, l.Table))
			} else {
				fix = append(fix, fmt.Sprintf("SELECT pglogical.replication_set_remove_table('%s', '%s');", l.Set, l.Table))
			}
		}
		out = append(out, doctorFinding{ID: "replication-node-local", Severity: severityProblem,
			Message: fmt.Sprintf("node %d (%s): node-local tables in a replication set (each node keeps its own record of "+
				"migrations and its own lock rows): %s", r.Node, r.Extension, r.nodeLocalList()),
			Fix: strings.Join(fix, "\n")})
	}

	if r.Extension == "spock" {
		st, ok, err := readSpockStatus(ctx, n.conn, r.Node)
		if err != nil {
			return nil, err
		}
		if down := st.notReplicating(); ok && len(down) > 0 {
			out = append(out, doctorFinding{ID: "replication-subscription", Severity: severityProblem,
				Message: fmt.Sprintf("node %d (spock): subscriptions not replicating: %s", r.Node, strings.Join(down, ", ")),
				Fix: "SELECT * FROM spock.sub_show_status();  -- and the server log; a disabled one: " +
					"SELECT spock.sub_enable('<name>', true);"})
		}
		var behaviour string
		if err := n.conn.QueryRow(ctx, `SELECT COALESCE(pg_catalog.current_setting('spock.exception_behaviour', true), '')`).
			Scan(&behaviour); err != nil {
			return nil, fmt.Errorf("read spock.exception_behaviour: %w", err)
		}
		if ok && behaviour != "sub_disable" {
			out = append(out, doctorFinding{ID: "replication-exception-behaviour", Severity: severityProblem,
				Message: fmt.Sprintf("node %d (spock): spock.exception_behaviour is %s: a transaction from another node that "+
					"fails to apply here is skipped, and pgrelay's rows in it (events, outcomes, heartbeats) never reach this node", r.Node, behaviour),
				Fix: "ALTER SYSTEM SET spock.exception_behaviour = 'sub_disable';\nSELECT pg_catalog.pg_reload_conf();  " +
					"-- a failing transaction then stops its subscription until it can apply (docs/multi-master.md)"})
		}
		if ok && st.Exceptions > 0 {
			out = append(out, doctorFinding{ID: "replication-exceptions", Severity: severityProblem,
				Message: fmt.Sprintf("node %d (spock): %d rows in spock.exception_log (%d on pgrelay's tables), the latest: %s: "+
					"each is a transaction from another node this node skipped", r.Node, st.Exceptions, st.OnPgrelay, st.Latest),
				Fix: "SELECT * FROM spock.exception_log ORDER BY retry_errored_at DESC;  -- repair the rows it names, then delete them"})
		}
	}

	ext := r.Extension
	if ext == "" {
		ext = "pglogical"
	}
	var track, conflict string
	var conflictSet bool
	if err := n.conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('track_commit_timestamp'),
		  COALESCE(pg_catalog.current_setting($1::text || '.conflict_resolution', true), ''),
		  pg_catalog.current_setting($1::text || '.conflict_resolution', true) IS NOT NULL`,
		ext).Scan(&track, &conflict, &conflictSet); err != nil {
		return nil, err
	}
	if track != "on" {
		out = append(out, doctorFinding{ID: "track-commit-timestamp", Severity: severityProblem,
			Message: fmt.Sprintf("node %d: track_commit_timestamp is %s: last-update-wins conflict resolution needs it on", n.nodeID, track),
			Fix:     "ALTER SYSTEM SET track_commit_timestamp = on;  -- then restart the server"})
	}
	// pglogical's default is apply_remote; Spock's is last_update_wins.
	if r.Extension != "" && (conflict != "last_update_wins") && (r.Extension == "pglogical" || conflictSet) {
		shown := conflict
		if !conflictSet {
			shown = "not set (the library is not loaded)"
		}
		out = append(out, doctorFinding{ID: "conflict-resolution", Severity: severityProblem,
			Message: fmt.Sprintf("node %d: %s.conflict_resolution is %s: pgrelay's tables need last update wins", n.nodeID, r.Extension, shown),
			Fix:     fmt.Sprintf("ALTER SYSTEM SET %s.conflict_resolution = 'last_update_wins';\nSELECT pg_catalog.pg_reload_conf();", r.Extension)})
	}
	if r.Extension != "" {
		var schema string
		if err := n.conn.QueryRow(ctx, `SELECT s.nspname::text FROM pg_catalog.pg_extension x
			JOIN pg_catalog.pg_namespace s ON s.oid = x.extnamespace WHERE x.extname = $1`,
			r.Extension).Scan(&schema); err != nil {
			return nil, err
		}
		var has bool
		if err := n.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute
			WHERE attrelid = pg_catalog.to_regclass($1) AND attname = 'sub_forward_origins' AND NOT attisdropped)`,
			pgx.Identifier{schema, "subscription"}.Sanitize()).Scan(&has); err != nil {
			return nil, err
		}
		if has {
			rows, err := n.conn.Query(ctx, `SELECT s.sub_name::text FROM `+pgx.Identifier{schema}.Sanitize()+`.subscription s
				WHERE COALESCE(pg_catalog.cardinality(s.sub_forward_origins), 0) > 0 ORDER BY 1`)
			if err != nil {
				return nil, err
			}
			subs, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return nil, err
			}
			if len(subs) > 0 {
				out = append(out, doctorFinding{ID: "replication-forwarding", Severity: severityProblem,
					Message: fmt.Sprintf("node %d: subscriptions that forward changes from other origins (changes loop between nodes): %s", n.nodeID, strings.Join(subs, ", ")),
					Fix:     "create these subscriptions again with forward_origins := '{}' (docs/multi-master.md, Setting up a cluster)"})
			}
		}
	}

	// pg_relay.node_id set for the database or the server, not only for a
	// role or this session. pg_settings does not show a parameter no
	// library defines; the server's files do (pg_file_settings: superusers,
	// or a role granted SELECT on it and EXECUTE on
	// pg_show_all_file_settings(); pg_read_all_settings is not enough on
	// PostgreSQL 15). Without that view, a value this
	// session has and no ALTER ROLE of this login gave counts as the
	// server's.
	var dbLevel, roleLevel, canReadFiles bool
	var session string
	if err := n.conn.QueryRow(ctx, `SELECT
		  EXISTS (SELECT FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
		   WHERE s.setrole = 0 AND c LIKE 'pg\_relay.node\_id=%'
		     AND s.setdatabase = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())),
		  EXISTS (SELECT FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
		   WHERE s.setrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) AND c LIKE 'pg\_relay.node\_id=%'),
		  pg_catalog.has_table_privilege('pg_catalog.pg_file_settings', 'SELECT'),
		  COALESCE(pg_catalog.current_setting('pg_relay.node_id', true), '')`).Scan(&dbLevel, &roleLevel, &canReadFiles, &session); err != nil {
		return nil, err
	}
	serverLevel := strings.TrimSpace(session) != "" && !roleLevel
	if canReadFiles {
		if err := n.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_file_settings f
			WHERE f.name = 'pg_relay.node_id' AND f.error IS NULL)`).Scan(&serverLevel); err != nil {
			return nil, err
		}
	}
	if !dbLevel && !serverLevel {
		out = append(out, doctorFinding{ID: "node-id-unset", Severity: severityProblem,
			Message: fmt.Sprintf("pg_relay.node_id is not set for this database or server (this session sees node %d): every node of a cluster needs its own id", n.nodeID),
			Fix: fmt.Sprintf("ALTER DATABASE %s SET pg_relay.node_id = '<N>';  -- a different N (0-1023) on each node",
				pgx.Identifier{n.dbName}.Sanitize())})
	}
	return out, nil
}

// nodeIDFindings: the nodes given must have different ids.
func nodeIDFindings(nodes []*doctorNode) []doctorFinding {
	by := map[int][]string{}
	for _, n := range nodes {
		by[n.nodeID] = append(by[n.nodeID], n.label)
	}
	ids := make([]int, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var out []doctorFinding
	for _, id := range ids {
		if len(by[id]) > 1 {
			out = append(out, doctorFinding{ID: "node-id-duplicate", Severity: severityProblem,
				Message: fmt.Sprintf("node id %d is used by %s: ids would collide and each node would take the other's rows for its own", id, strings.Join(by[id], ", ")),
				Fix:     "ALTER DATABASE <database> SET pg_relay.node_id = '<N>';  -- on all but one of them, each with an unused N (0-1023), before any Processor runs there"})
		}
	}
	return out
}

// skewFindings: the nodes' clocks, measured from this machine, must agree
// within max: leases, heartbeats and ids use each node's clock.
func skewFindings(nodes []*doctorNode, max time.Duration) []doctorFinding {
	if len(nodes) < 2 {
		return nil
	}
	lo, hi := nodes[0], nodes[0]
	for _, n := range nodes[1:] {
		if n.skew < lo.skew {
			lo = n
		}
		if n.skew > hi.skew {
			hi = n
		}
	}
	d := hi.skew - lo.skew
	if d <= max {
		return nil
	}
	return []doctorFinding{{ID: "clock-skew", Severity: severityProblem,
		Message: fmt.Sprintf("the clock of %s is %s ahead of %s's (more than %s): leases, heartbeats and ids use each node's clock",
			hi.label, d.Round(time.Millisecond), lo.label, max),
		Fix: "synchronise the servers' clocks (NTP)"}}
}

func checkPublisher(ctx context.Context, n *doctorNode, cfg doctorConfig) ([]doctorFinding, error) {
	var out []doctorFinding
	cursors, err := store.PublishCursorCount(ctx, n.conn)
	if err != nil {
		return nil, err
	}
	owner, canSee, err := store.HorizonOwner(ctx, n.conn)
	if err != nil {
		return nil, err
	}
	if !canSee {
		f := doctorFinding{ID: "publisher-stats", Severity: severityWarning,
			Message: fmt.Sprintf("pgrelay's owner %s is neither a superuser nor a member of pg_read_all_stats: a Processor with --nats-url will stop publishing (PR040)", owner),
			Fix:     fmt.Sprintf("GRANT pg_read_all_stats TO %s;", pgx.Identifier{owner}.Sanitize())}
		if cursors > 0 {
			f.Severity = severityProblem
			f.Message = fmt.Sprintf("pgrelay's owner %s is neither a superuser nor a member of pg_read_all_stats: the NATS publisher (it has run here: pgrelay.publish_cursors has rows) stalls with PR040", owner)
		}
		out = append(out, f)
	}
	if cursors == 0 {
		return out, nil
	}
	backlog, err := store.PublishBacklog(ctx, n.conn)
	if err != nil {
		return nil, err
	}
	for _, c := range backlog {
		if c.Backlog == 0 {
			continue
		}
		oldest, age, ok, err := store.UnpublishedAge(ctx, n.conn, c.Node, c.Source, c.LastID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if age <= cfg.maxPublishAge {
			continue
		}
		count := strconv.FormatInt(c.Backlog, 10)
		if c.Backlog > store.BacklogCap {
			count = "more than " + strconv.FormatInt(store.BacklogCap, 10)
		}
		out = append(out, doctorFinding{ID: "publish-lag", Severity: severityProblem,
			Message: fmt.Sprintf("node %d's NATS publisher (source %s) has %s unpublished events, the oldest %s old (written %s): "+
				"the Processors' retention (--log-retention, a flag doctor cannot see) deletes old log rows, and an event deleted before it is published never reaches NATS",
				c.Node, c.Source, count, age.Round(time.Second), oldest.UTC().Format(time.RFC3339)),
			Fix: "find why node " + strconv.Itoa(c.Node) + "'s publisher is behind (pgrelay stats, the Processor's log, pgrelay_events_backlog); keep the retention above the lag until it catches up"})
	}
	return out, nil
}

// queueStorage is what the migrations set on pgrelay.queue with ALTER TABLE
// pgrelay.queue SET (...), later migrations winning: read from them so the
// rule lives in one place.
func queueStorage() (map[string]string, error) {
	out := map[string]string{}
	all, err := migrations.All()
	if err != nil {
		return nil, err
	}
	stmt := regexp.MustCompile(`(?is)ALTER\s+TABLE\s+pgrelay\.queue\s+SET\s*\(([^)]*)\)`)
	kv := regexp.MustCompile(`^\s*([a-z_.]+)\s*=\s*'?([^',]*?)'?\s*$`)
	for _, m := range all {
		for _, g := range stmt.FindAllStringSubmatch(m.SQL, -1) {
			for _, part := range strings.Split(g[1], ",") {
				if p := kv.FindStringSubmatch(part); p != nil {
					out[strings.ToLower(p[1])] = p[2]
				}
			}
		}
	}
	return out, nil
}

func checkVacuum(ctx context.Context, n *doctorNode, cfg doctorConfig) ([]doctorFinding, error) {
	var out []doctorFinding
	autovacuum, opts, err := store.QueueVacuum(ctx, n.conn)
	if err != nil {
		return nil, err
	}
	if autovacuum != "on" {
		out = append(out, doctorFinding{ID: "autovacuum-off", Severity: severityProblem,
			Message: "autovacuum is off: the queue's dead rows pile up and every claim walks over them",
			Fix:     "ALTER SYSTEM SET autovacuum = on;\nSELECT pg_catalog.pg_reload_conf();"})
	}
	have := map[string]string{}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		have[k] = v
	}
	want, err := queueStorage()
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var diff, set []string
	for _, k := range keys {
		if have[k] != want[k] {
			got := have[k]
			if got == "" {
				got = "unset"
			}
			diff = append(diff, fmt.Sprintf("%s = %s (want %s)", k, got, want[k]))
			set = append(set, fmt.Sprintf("%s = %s", k, want[k]))
		}
	}
	if v, ok := have["autovacuum_enabled"]; ok && v != "true" && v != "on" {
		diff = append(diff, "autovacuum_enabled = "+v)
		set = append(set, "autovacuum_enabled = true")
	}
	if len(diff) > 0 {
		out = append(out, doctorFinding{ID: "queue-autovacuum", Severity: severityWarning,
			Message: "pgrelay.queue's autovacuum storage parameters differ from what pgrelay migrate sets (docs/dba-guide.md, Vacuum): " + strings.Join(diff, ", "),
			Fix:     "ALTER TABLE pgrelay.queue SET (" + strings.Join(set, ", ") + ");"})
	}

	// Open transactions that hold back vacuum of this database's tables.
	// pg_stat_activity hides other roles' transactions from a login that is
	// neither a superuser nor in pg_read_all_stats: say so rather than find
	// nothing.
	var seesAll bool
	if err := n.conn.QueryRow(ctx, `SELECT r.rolsuper OR pg_catalog.pg_has_role(r.oid, 'pg_read_all_stats', 'USAGE')
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`).Scan(&seesAll); err != nil {
		return nil, err
	}
	if !seesAll {
		out = append(out, doctorFinding{ID: "long-transaction-unchecked", Severity: severityWarning,
			Message: "this login is neither a superuser nor a member of pg_read_all_stats: other roles' open transactions are hidden from it and were not checked",
			Fix:     "run pgrelay doctor as a superuser or a member of pg_read_all_stats"})
	}
	rows, err := n.conn.Query(ctx, `SELECT a.pid, COALESCE(a.usename::text, ''), COALESCE(a.application_name, ''), COALESCE(a.state, ''),
		  pg_catalog.clock_timestamp() - a.xact_start
		FROM pg_catalog.pg_stat_activity a
		WHERE a.datname = pg_catalog.current_database() AND a.pid <> pg_catalog.pg_backend_pid()
		  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
		  AND a.xact_start < pg_catalog.clock_timestamp() - $1::interval
		ORDER BY a.xact_start`, cfg.maxTransactionAge)
	if err != nil {
		return nil, err
	}
	var txs, kill []string
	var pid int32
	var user, app, state string
	var open time.Duration
	_, err = pgx.ForEachRow(rows, []any{&pid, &user, &app, &state, &open}, func() error {
		txs = append(txs, fmt.Sprintf("pid %d (user %s, application %q, %s) open for %s", pid, user, app, state, open.Round(time.Second)))
		kill = append(kill, fmt.Sprintf("SELECT pg_catalog.pg_terminate_backend(%d);", pid))
		return nil
	})
	if err != nil {
		return nil, err
	}
	rows, err = n.conn.Query(ctx, `SELECT p.gid, pg_catalog.clock_timestamp() - p.prepared FROM pg_catalog.pg_prepared_xacts p
		WHERE p.database = pg_catalog.current_database() AND p.prepared < pg_catalog.clock_timestamp() - $1::interval
		ORDER BY p.prepared`, cfg.maxTransactionAge)
	if err != nil {
		return nil, err
	}
	var gid string
	_, err = pgx.ForEachRow(rows, []any{&gid, &open}, func() error {
		txs = append(txs, fmt.Sprintf("prepared transaction %q, prepared %s ago", gid, open.Round(time.Second)))
		kill = append(kill, fmt.Sprintf("ROLLBACK PREPARED '%s';", strings.ReplaceAll(gid, "'", "''")))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(txs) > 0 {
		out = append(out, doctorFinding{ID: "long-transaction", Severity: severityWarning,
			Message: fmt.Sprintf("transactions open longer than %s hold back vacuum of the queue's dead rows: %s", cfg.maxTransactionAge, strings.Join(txs, "; ")),
			Fix:     "-- once you know what they are:\n" + strings.Join(kill, "\n")})
	}

	// idle_in_transaction_session_timeout: for the database (as this session
	// sees it) and the producers' logins that set their own.
	var dbTimeout string
	if err := n.conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('idle_in_transaction_session_timeout')").Scan(&dbTimeout); err != nil {
		return nil, err
	}
	producers, err := loginMembers(ctx, n.conn, "pgrelay_producer")
	if err != nil {
		return nil, err
	}
	rows, err = n.conn.Query(ctx, `SELECT r.rolname::text FROM pg_catalog.pg_db_role_setting s
		  JOIN pg_catalog.pg_roles r ON r.oid = s.setrole, pg_catalog.unnest(s.setconfig) c
		WHERE s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))
		  AND c LIKE 'idle\_in\_transaction\_session\_timeout=%' AND c !~ '=\s*0+\s*(ms|s|min|h|d)?\s*$'
		  AND r.rolname = ANY ($1)`, producers)
	if err != nil {
		return nil, err
	}
	own, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if dbTimeout == "0" {
		covered := map[string]bool{}
		for _, r := range own {
			covered[r] = true
		}
		var without []string
		for _, p := range producers {
			if !covered[p] {
				without = append(without, p)
			}
		}
		if len(producers) == 0 || len(without) > 0 {
			who := "no producer login sets its own"
			if len(without) > 0 {
				who = "nor do the producer logins " + strings.Join(without, ", ")
			}
			out = append(out, doctorFinding{ID: "idle-in-transaction-timeout", Severity: severityWarning,
				Message: "idle_in_transaction_session_timeout is 0 for this database, " + who +
					": a session left idle in a transaction holds back the queue's vacuum until it ends",
				Fix: fmt.Sprintf("ALTER DATABASE %s SET idle_in_transaction_session_timeout = '5min';  -- or per application login: ALTER ROLE <login> SET ...",
					pgx.Identifier{n.dbName}.Sanitize())})
		}
	}
	return out, nil
}
