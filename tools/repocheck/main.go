// Command repocheck fails when the repository tracks a build output (a file over 1 MiB or an ELF binary) or a
// production function over 80 lines (LongFunctions). `make lint` runs it from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	root := flag.String("root", ".", "the repository's work tree")
	flag.Parse()
	findings, err := Check(context.Background(), *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "repocheck:", err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Fprintln(os.Stderr, "repocheck: tracked file must not be:", f)
	}
	long, err := LongFunctions(context.Background(), *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "repocheck:", err)
		os.Exit(2)
	}
	for _, f := range long {
		fmt.Fprintln(os.Stderr, "repocheck:", f)
	}
	if len(findings)+len(long) > 0 {
		os.Exit(1)
	}
}
