package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// secretFlags are the flags whose values usually hold a password. Each has a
// companion --<name>-file (and PGRELAY_<NAME>_FILE) that reads the value from
// a file, so the password shows neither in `ps` nor in the environment.
func secretFlags() []string { return []string{"database-url", "smtp-url", "nats-url", "web-auth"} }

// addFileFlags registers --<name>-file for every secret flag fs has.
func addFileFlags(fset *flag.FlagSet) {
	for _, n := range secretFlags() {
		if fset.Lookup(n) != nil && fset.Lookup(n+"-file") == nil {
			fset.String(n+"-file", "", "read --"+n+" from this file (first line; keep it mode 0600), instead of the command line or the environment")
		}
	}
}

// visited is the set of flags fs has been given so far.
func visited(fset *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// applyFileFlags sets each secret flag from its -file companion when that
// was given and the flag itself was not; given both at the same level (both
// on the command line, or both in the environment) is a usage error. It runs
// once after the command line (skip: nothing) and once after the
// environment (skip: what the command line settled).
func (a *app) applyFileFlags(fset *flag.FlagSet, skip map[string]bool) error {
	set := visited(fset)
	for _, n := range secretFlags() {
		file := fset.Lookup(n + "-file")
		if file == nil || !set[file.Name] || skip[n] || skip[file.Name] {
			continue
		}
		if set[n] {
			return &usageError{msg: fmt.Sprintf("give --%s or --%s-file, not both", n, n)}
		}
		v, err := a.readSecretFile(file.Name, file.Value.String())
		if err != nil {
			return err
		}
		if err := fset.Set(n, v); err != nil {
			return &usageError{msg: fmt.Sprintf("--%s %s: %v", file.Name, file.Value.String(), err)}
		}
	}
	return nil
}

// readSecretFile reads a secret's file: its first line, without surrounding
// blanks. It warns when anyone on the machine can read the file.
func (a *app) readSecretFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &usageError{msg: fmt.Sprintf("--%s %s: no such file", flagName, path)}
		}
		return "", fmt.Errorf("--%s %s: %w", flagName, path, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", &usageError{msg: fmt.Sprintf("--%s %s: the file is empty", flagName, path)}
	}
	a.warnWorldReadable("--"+flagName+" "+path, path)
	return line, nil
}

// warnWorldReadable warns on stderr when the file at path, which holds
// credentials, can be read by every user of the machine.
func (a *app) warnWorldReadable(what, path string) {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o004 == 0 {
		return
	}
	fmt.Fprintf(a.stderr, "pgrelay: warning: %s holds credentials and every user of this machine can read it (mode %04o): chmod 600 it\n",
		what, st.Mode().Perm())
}
