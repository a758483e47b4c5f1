// Command pgrelay is the pgrelay CLI: migrate a database, run the Processor,
// try everything locally with `pgrelay dev`, and inspect the queue.
package main

import (
	"os"

	"github.com/pgrelay/pgrelay/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
