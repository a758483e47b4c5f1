package pgrelay_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// goDocImports are the packages the Go blocks of docs/go.md may name
// without importing them: the test imports those a file without imports
// uses, as goimports would.
var goDocImports = map[string]string{
	"context":       "context",
	"errors":        "errors",
	"fmt":           "fmt",
	"http":          "net/http",
	"json":          "encoding/json",
	"log":           "log",
	"os":            "os",
	"slog":          "log/slog",
	"strconv":       "strconv",
	"testing":       "testing",
	"time":          "time",
	"pgx":           "github.com/jackc/pgx/v5",
	"pgxpool":       "github.com/jackc/pgx/v5/pgxpool",
	"require":       "github.com/stretchr/testify/require",
	"pgrelay":       "github.com/pgrelay/pgrelay",
	"processor":     "github.com/pgrelay/pgrelay/processor",
	"pgrelaytest":   "github.com/pgrelay/pgrelay/pgrelaytest",
	"otel":          "go.opentelemetry.io/otel",
	"sdktrace":      "go.opentelemetry.io/otel/sdk/trace",
	"otlptracehttp": "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
	"river":         "github.com/riverqueue/river",
	"riverpgxv5":    "github.com/riverqueue/river/riverdriver/riverpgxv5",
	"rivertest":     "github.com/riverqueue/river/rivertest",
	"rivertype":     "github.com/riverqueue/river/rivertype",
}

// riverDocDir is the directory of docs/go.md's River blocks: they build in a
// module of their own, which requires River as bench/river does.
const riverDocDir = "riverorders"

// goDocFileLine is the first line of every Go block: a comment that names
// the block's file, a slash-separated path in the module ending in .go,
// optionally followed by a caption.
var goDocFileLine = regexp.MustCompile(`^// ([a-z0-9_]+/)*[a-z0-9_]+\.go\b`)

// Every Go block of docs/go.md builds, in modules outside this one that use
// pgrelay as a user's program does: through its exported API only (an
// outside module cannot import pgrelay's internal packages), offline, from
// the module cache this repository's own build fills.
//
// The convention of docs/go.md's Go blocks:
//   - Every ```go block is a file of an example module, or a part of one. Its
//     first line is a comment naming the file by its path in the module
//     ("// main.go", "// orders/orders.go: pgrelay"); the blocks naming the
//     same file are its parts, joined in the page's order. Each is as gofmt
//     formats it.
//   - A file without a package clause is in the package named after its
//     directory (main at the module's root). A file without imports gets
//     those of the goDocImports it names, so that short blocks show the code
//     alone; a file with imports is built as written.
//   - The files under riverorders/ are River's side of the comparison with
//     River: they build in a second module that requires River at
//     bench/river's versions. All the others build in example.com/orders,
//     which requires pgrelay, replaced by this repository.
//
// Each module is built with `go build ./...` and `go vet ./...` (which
// compiles its _test.go files too): a block that stops compiling fails here.
func TestGoDocBuilds(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the page's blocks")
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "go.md"))
	require.NoError(t, err)

	files, order, err := goDocFiles(doc)
	require.NoError(t, err)
	pgrelayFiles, riverFiles := map[string]string{}, map[string]string{}
	for _, name := range order {
		src, err := goDocSource(name, files[name])
		require.NoError(t, err, "docs/go.md's %s", name)
		if strings.HasPrefix(name, riverDocDir+"/") {
			riverFiles[name] = src
		} else {
			pgrelayFiles[name] = src
		}
	}
	require.NotEmpty(t, pgrelayFiles, "docs/go.md shows pgrelay's Go API")
	require.NotEmpty(t, riverFiles, "docs/go.md shows River's side of the comparison")

	// The outside module of pgrelay's blocks.
	mainMod, err := modfile.Parse("go.mod", mustRead(t, filepath.Join(root, "go.mod")), nil)
	require.NoError(t, err)
	orders := new(modfile.File)
	require.NoError(t, orders.AddModuleStmt("example.com/orders"))
	require.NoError(t, orders.AddGoStmt(mainMod.Go.Version))
	require.NoError(t, orders.AddRequire("github.com/pgrelay/pgrelay", "v0.0.0"))
	require.NoError(t, orders.AddReplace("github.com/pgrelay/pgrelay", "", root, ""))
	goDocBuild(t, goCmd, orders, mustRead(t, filepath.Join(root, "go.sum")), pgrelayFiles)

	// River's module: bench/river's requirements (its go.mod lists the whole
	// graph, so nothing is looked up), and the test modules rivertest
	// imports, at this repository's versions, whose go.sum has them.
	riverMod, err := modfile.Parse("go.mod", mustRead(t, filepath.Join(root, "bench", "river", "go.mod")), nil)
	require.NoError(t, err)
	require.NoError(t, riverMod.AddModuleStmt("example.com/riverorders"))
	for _, dep := range []string{"github.com/stretchr/testify", "go.uber.org/goleak", "go.yaml.in/yaml/v3"} {
		i := slices.IndexFunc(mainMod.Require, func(r *modfile.Require) bool { return r.Mod.Path == dep })
		require.GreaterOrEqual(t, i, 0, "go.mod requires %s", dep)
		require.NoError(t, riverMod.AddRequire(dep, mainMod.Require[i].Mod.Version))
	}
	sums := append(mustRead(t, filepath.Join(root, "bench", "river", "go.sum")), mustRead(t, filepath.Join(root, "go.sum"))...)
	goDocBuild(t, goCmd, riverMod, sums, riverFiles)
}

// goDocFiles returns the Go blocks of a page joined into files, by the name
// each block's first line gives, and the names in the page's order.
func goDocFiles(doc []byte) (files map[string][]string, order []string, err error) {
	files = map[string][]string{}
	var block []string
	in, at := false, 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !in && line == "```go":
			in, at, block = true, n, nil
		case in && line == "```":
			in = false
			if len(block) == 0 {
				return nil, nil, fmt.Errorf("line %d: an empty go block", at)
			}
			m := goDocFileLine.FindString(block[0])
			if m == "" {
				return nil, nil, fmt.Errorf("line %d: a go block's first line names its file (// dir/name.go), not %q", at, block[0])
			}
			name := strings.TrimPrefix(m, "// ")
			if _, ok := files[name]; !ok {
				order = append(order, name)
			}
			files[name] = append(files[name], strings.Join(block, "\n"))
		case in:
			block = append(block, line)
		}
	}
	if in {
		return nil, nil, fmt.Errorf("line %d: a go block is not closed", at)
	}
	return files, order, sc.Err()
}

// goDocSource makes a file of its parts: the package clause its directory
// names when it has none, and, when it has no imports, those it uses.
func goDocSource(name string, parts []string) (string, error) {
	for _, part := range parts {
		text := part + "\n"
		if !strings.Contains(text, "\npackage ") {
			text = "package x\n\n" + text
		}
		if out, err := format.Source([]byte(text)); err != nil || string(out) != text {
			return "", fmt.Errorf("a part of %s is not as gofmt formats it (%v):\n%s", name, err, part)
		}
	}
	src := strings.Join(parts, "\n\n") + "\n"
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, name, src, parser.PackageClauseOnly); err != nil || f.Name == nil {
		pkg := path.Base(path.Dir(name))
		if pkg == "." {
			pkg = "main"
		}
		src = "package " + pkg + "\n\n" + src
	}
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	if len(f.Imports) > 0 { // a whole file, taken as written
		out, err := format.Source([]byte(src))
		return string(out), err
	}
	imported := map[string]bool{}
	var missing []string
	for _, id := range f.Unresolved {
		if p, ok := goDocImports[id.Name]; ok && !imported[id.Name] {
			imported[id.Name] = true
			if path.Base(p) == id.Name {
				missing = append(missing, strconv.Quote(p))
			} else {
				missing = append(missing, id.Name+" "+strconv.Quote(p))
			}
		}
	}
	if len(missing) > 0 {
		end := fset.Position(f.Name.End()).Offset
		src = src[:end] + "\n\nimport (\n" + strings.Join(missing, "\n") + "\n)\n" + src[end:]
	}
	out, err := format.Source([]byte(src))
	return string(out), err
}

// goDocBuild writes a module of files and builds and vets it, offline.
func goDocBuild(t *testing.T, goCmd string, mod *modfile.File, sums []byte, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	mod.Cleanup()
	gomod, err := mod.Format()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644))
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		// -mod=mod lets go add the requirements the blocks' imports need;
		// GOPROXY=off keeps it to the module cache, whose modules go.sum
		// already vouches for.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOSUMDB=off",
			"GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s of docs/go.md's blocks (%s; a module missing from the module cache "+
			"comes with `make deps-go`):\n%s\n%s", strings.Join(args, " "),
			mod.Module.Mod.Path, out, goDocListing(files))
	}
}

// goDocListing shows the files as built, with line numbers, so that a
// failure's positions can be read.
func goDocListing(files map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "--- %s\n", name)
		for i, line := range strings.Split(files[name], "\n") {
			fmt.Fprintf(&b, "%4d %s\n", i+1, line)
		}
	}
	return b.String()
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}
