// Command devcluster runs Stowage's local control plane (package e2e/cluster) on this machine.
//
//	devcluster up [--dir DIR] [--cache-dir DIR]
//	devcluster demo [--keep] [--dir DIR] [--time-scale 1]
//
// Each subcommand is an entry in commands(): a name, a one-line summary and a run function that parses
// its own flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one devcluster subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"up":   {summary: "start etcd, kube-apiserver and kube-controller-manager; run until interrupted", run: runUp},
		"demo": {summary: "run the EBS storage stack on this machine and walk volumes through their life", run: runDemo},
	}
}

func main() {
	cmds := commands()
	if len(os.Args) < 2 || cmds[os.Args[1]].run == nil {
		usage(cmds)
		os.Exit(2)
	}
	name := os.Args[1]
	// The first SIGINT/SIGTERM cancels ctx and the command tears down; NotifyContext's stop then restores
	// the default handling, so a second one ends devcluster at once (children follow by Pdeathsig).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := cmds[name].run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster %s: %v\n", name, err)
		os.Exit(1)
	}
}

// parseFlags parses a subcommand's flags; no subcommand takes arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

func usage(cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: devcluster <command> [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun devcluster <command> -h for its flags.")
}
