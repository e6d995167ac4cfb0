//go:build bench

// Command netmodel runs the network model (package netmodel) as a process of its own, so a benchmark
// can charge the model's CPU to it rather than to the clients it measures. It serves until SIGTERM or
// SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stowage-csi/stowage/e2e/netmodel"
)

func main() {
	cfg := netmodel.Default()
	var target string
	var mibs int64
	flag.StringVar(&target, "target", "", "the server's URL (http://host:port)")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "the proxy's address")
	flag.DurationVar(&cfg.Latency, "latency", cfg.Latency, "added before each response")
	flag.Int64Var(&mibs, "bandwidth-mib", cfg.Bandwidth>>20, "MiB/s each direction, all connections together (0: no cap)")
	flag.Parse()
	cfg.Bandwidth = mibs << 20
	if err := run(target, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "netmodel:", err)
		os.Exit(1)
	}
}

func run(target string, cfg netmodel.Config) error {
	if target == "" {
		return fmt.Errorf("--target is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p, err := netmodel.Start(target, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("serving %s -> %s, latency %v, %d MiB/s\n", p.URL, target, cfg.Latency, cfg.Bandwidth>>20)
	<-ctx.Done()
	return p.Close()
}
