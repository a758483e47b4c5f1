package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events/store"
)

// runDead lists, shows, retries and discards dead letters (pgrelay.dead_letters):
//
//	pgrelay dead list [--channel C] [--since T] [--limit N] [--json]
//	pgrelay dead show ID [--json]
//	pgrelay dead retry ID... | --channel C [--since T] [--yes]
//	pgrelay dead discard ID... | --channel C [--since T] [--yes]
func runDead(ctx context.Context, a *app, args []string) error {
	const usage = "usage: pgrelay dead list|show|retry|discard [flags] (pgrelay dead <subcommand> -h for its flags)"
	if len(args) == 0 {
		return &usageError{msg: usage}
	}
	switch args[0] {
	case "list":
		return runDeadList(ctx, a, args[1:])
	case "show":
		return runDeadShow(ctx, a, args[1:])
	case "retry":
		return runDeadAct(ctx, a, deadRetry, args[1:])
	case "discard":
		return runDeadAct(ctx, a, deadDiscard, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(a.stderr, usage)
		return flag.ErrHelp
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q; %s", args[0], usage)}
}

// deadDB adds --database-url to fs and returns a connector for it.
func deadDB(fs *flag.FlagSet) func(ctx context.Context) (*pgx.Conn, error) {
	url := fs.String("database-url", "", "PostgreSQL URL of a login in pgrelay_admin (required)")
	return func(ctx context.Context) (*pgx.Conn, error) {
		if *url == "" {
			return nil, &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
		}
		return connectMigrated(ctx, *url)
	}
}

func runDeadList(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("dead list")
	connect := deadDB(fs)
	channel := fs.String("channel", "", "only this channel's dead letters")
	since := fs.String("since", "", "only those that ended at or after this: RFC 3339 (2026-05-04T10:00:00Z) or a duration ago (24h)")
	limit := fs.Int("limit", 100, "show at most this many, the most recent first")
	asJSON := fs.Bool("json", false, "print a JSON array of the dead letters (payloads and errors in full)")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	f, err := deadFilter(*channel, *since)
	if err != nil {
		return err
	}
	if *limit < 1 {
		return &usageError{msg: fmt.Sprintf("--limit %d: must be at least 1", *limit)}
	}
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	list, err := store.DeadLetters(ctx, conn, f, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []store.DeadLetter{}
		}
		return writeJSON(a, list)
	}
	// A PRIORITY column only when a listed letter has a priority other
	// than the default, 0: most have none.
	prioritised := slices.ContainsFunc(list, func(l store.DeadLetter) bool { return l.Priority != 0 })
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	head := "ID\tORIGIN\tCHANNEL\tOUTCOME\tATTEMPTS\t"
	if prioritised {
		head += "PRIORITY\t"
	}
	fmt.Fprintln(tw, head+"ENDED\tNODE\tLAST ERROR")
	for _, l := range list {
		lastErr := "-"
		if l.LastError != nil {
			lastErr = shorten(*l.LastError, 60)
		}
		priority := ""
		if prioritised {
			priority = strconv.Itoa(l.Priority) + "\t"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%s%s ago\t%d\t%s\n", l.ID, l.OriginID, escapeControl(l.Channel), l.Outcome,
			l.Attempts, priority, time.Since(l.EndedAt).Round(time.Second), l.Node, escapeControl(lastErr))
	}
	if len(list) == 0 {
		fmt.Fprintln(tw, "(no dead letters)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == *limit {
		total, err := store.CountDeadLetters(ctx, conn, f)
		if err != nil {
			return err
		}
		if total > int64(*limit) {
			fmt.Fprintf(a.stdout, "(the %d most recent of %d; --limit shows more)\n", *limit, total)
		}
	}
	return nil
}

func runDeadShow(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("dead show")
	connect := deadDB(fs)
	asJSON := fs.Bool("json", false, "print the dead letter as a JSON object")
	pos, err := a.parseMixed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "usage: pgrelay dead show ID --database-url URL"}
	}
	ids, err := deadIDs(pos)
	if err != nil {
		return err
	}
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	l, err := store.DeadLetterByID(ctx, conn, ids[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a, l)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, escapeControl(v)) }
	row("id", strconv.FormatInt(l.ID, 10))
	row("origin id", strconv.FormatInt(l.OriginID, 10))
	row("channel", l.Channel)
	row("outcome", l.Outcome)
	row("attempts", strconv.Itoa(l.Attempts))
	if l.Priority != 0 {
		row("priority", strconv.Itoa(l.Priority))
	}
	row("ended at", l.EndedAt.Format(time.RFC3339Nano))
	row("node", strconv.Itoa(l.Node))
	if l.RunInNode != nil {
		row("pinned to node", strconv.Itoa(*l.RunInNode))
	}
	if l.NotificationID != nil {
		row("notification", strconv.FormatInt(*l.NotificationID, 10))
	}
	lastErr := "-"
	if l.LastError != nil {
		lastErr = *l.LastError
	}
	row("last error", lastErr)
	row("payload", l.Payload)
	return tw.Flush()
}

// deadAction is what retry and discard do to one dead letter, and to a
// channel's.
type deadAction struct {
	name, done string
	one        func(ctx context.Context, q store.Querier, id int64) (string, error)
	channel    func(ctx context.Context, q store.Querier, f store.DeadLetterFilter) (int64, error)
}

var (
	deadRetry = deadAction{name: "retry", done: "retried",
		one: func(ctx context.Context, q store.Querier, id int64) (string, error) {
			n, err := store.RetryDeadLetter(ctx, q, id)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("retried dead letter %d: enqueued again as %d", id, n), nil
		},
		channel: store.RetryAllDeadLetters}
	deadDiscard = deadAction{name: "discard", done: "discarded",
		one: func(ctx context.Context, q store.Querier, id int64) (string, error) {
			if err := store.DiscardDeadLetter(ctx, q, id); err != nil {
				return "", err
			}
			return fmt.Sprintf("discarded dead letter %d", id), nil
		},
		channel: store.DiscardAllDeadLetters}
)

// runDeadAct runs retry or discard: of the dead letters named by id, or of
// a channel's. More than one (several ids, or a channel) asks
// for confirmation on a terminal, or needs --yes.
func runDeadAct(ctx context.Context, a *app, act deadAction, args []string) error {
	fs := a.newFlags("dead " + act.name)
	connect := deadDB(fs)
	yes := fs.Bool("yes", false, "confirm acting on more than one dead letter without being asked")
	channel := fs.String("channel", "", "every dead letter of this channel (instead of ids)")
	since := fs.String("since", "", "with --channel: only those that ended at or after this: RFC 3339 or a duration ago (24h)")
	pos, err := a.parseMixed(fs, args)
	if err != nil {
		return err
	}
	byChannel := *channel != ""
	switch {
	case byChannel && len(pos) > 0:
		return &usageError{msg: "give dead letter ids or --channel, not both"}
	case !byChannel && len(pos) == 0:
		return &usageError{msg: fmt.Sprintf("usage: pgrelay dead %s ID... | --channel C [--since T] [--yes]", act.name)}
	case !byChannel && *since != "":
		return &usageError{msg: "--since goes with --channel"}
	}
	var f store.DeadLetterFilter
	if byChannel {
		if f, err = deadFilter(*channel, *since); err != nil {
			return err
		}
	}
	ids, err := deadIDs(pos)
	if err != nil {
		return err
	}
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	if byChannel || len(ids) > 1 {
		var n int64
		what := ""
		if byChannel {
			if n, err = store.CountDeadLetters(ctx, conn, f); err != nil {
				return err
			}
			what = fmt.Sprintf(" of channel %s", escapeControl(f.Channel))
			if !f.Since.IsZero() {
				what += " that ended since " + f.Since.Format(time.RFC3339)
			}
		} else {
			found, err := store.DeadLettersByID(ctx, conn, ids)
			if err != nil {
				return err
			}
			n = int64(len(found))
		}
		fmt.Fprintf(a.stdout, "%d dead letters%s to %s\n", n, what, act.name)
		if n == 0 && byChannel {
			return nil
		}
		if err := a.confirm(*yes, fmt.Sprintf("%s %d dead letters?", act.name, n)); err != nil {
			return err
		}
	}
	if byChannel {
		n, err := act.channel(ctx, conn, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s %d dead letters\n", act.done, n)
		return nil
	}
	if len(ids) == 1 {
		msg, err := act.one(ctx, conn, ids[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, msg)
		return nil
	}
	var failed int
	for _, id := range ids {
		msg, err := act.one(ctx, conn, id)
		if err != nil {
			failed++
			fmt.Fprintf(a.stderr, "pgrelay dead %s: %s\n", act.name, oneLine(err.Error()))
			continue
		}
		fmt.Fprintln(a.stdout, msg)
	}
	fmt.Fprintf(a.stdout, "%s %d dead letters\n", act.done, len(ids)-failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letters not %s (see above)", failed, len(ids), act.done)
	}
	return nil
}

// confirm asks the question on a terminal (yes: not at all) and returns nil
// for a yes; without a terminal it needs --yes.
func (a *app) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	if !a.terminal {
		return &usageError{msg: "acting on more than one dead letter needs --yes (or a terminal to confirm on)"}
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	answer, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && answer == "" {
		return fmt.Errorf("read the confirmation: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not confirmed: nothing done")
}

// deadFilter reads --channel and --since.
func deadFilter(channel, since string) (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{Channel: channel}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return f, &usageError{msg: fmt.Sprintf("--since %q: %v", since, err)}
		}
		f.Since = t
	}
	return f, nil
}

// deadIDs reads dead letter ids.
func deadIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, &usageError{msg: fmt.Sprintf("dead letter id %q: expected a positive integer", s)}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// writeJSON prints v as indented JSON.
func writeJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
